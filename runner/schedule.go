package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
)

// Run is what one unit of a run came to.
type Run struct {
	Unit       *config.Unit
	Result     *result.Result
	Start, End time.Time
}

// Units runs units as their graph allows, at most concurrency at once:
// a unit starts once every unit it depends on has finished and reached
// its goal (run says whether a unit must also be healthy for that: it is
// depended on). A unit that writes (apply, delete, a drift that corrects)
// whose dependency did not reach its goal is not run, and is
// DependencyNotReady; a preview (diff, validate, a drift that only
// reports) runs all the same, so that its outcome is known. A suspended
// unit is not run, is Suspended, and its dependents wait for nothing
// from it. With reverse (delete), a unit goes
// after every unit that depends on it. Units not started when ctx ends
// are Cancelled; a running unit stops as a single run does. The result
// keeps the units' order.
func (s *Session) Units(ctx context.Context, units []*config.Unit, concurrency int, reverse bool,
	run func(ctx context.Context, u *config.Unit, dependedOn bool) *result.Result) []Run {
	version := s.Version
	if s.RunFile == nil {
		s.RunFile = units
	}
	n := len(units)
	runs := make([]Run, n)
	index := make(map[string]int, n)
	for i, u := range units {
		index[u.Name], runs[i].Unit = i, u
	}
	// next[i] are the units that wait for i; waiting[i] counts the
	// units i still waits for.
	next := make([][]int, n)
	waiting := make([]int, n)
	for i, u := range units {
		for _, d := range u.DependsOn {
			first, then := index[d], i
			if reverse {
				first, then = i, index[d]
			}
			next[first] = append(next[first], then)
			waiting[then]++
		}
	}
	blockedBy := make([]string, n) // the first unit that kept i from running
	var queue []int
	for i := range units {
		if waiting[i] == 0 {
			queue = append(queue, i)
		}
	}
	done := make(chan int)
	running, finished := 0, 0
	finish := func(i int) {
		finished++
		ok := reachedGoal(runs[i].Result)
		for _, k := range next[i] {
			if !ok && blockedBy[k] == "" {
				blockedBy[k] = units[i].Name
			}
			if waiting[k]--; waiting[k] == 0 {
				queue = append(queue, k)
			}
		}
	}
	for finished < n {
		for len(queue) > 0 && running < max(concurrency, 1) {
			i := queue[0]
			queue = queue[1:]
			u := units[i]
			now := time.Now()
			switch {
			case blockedBy[i] != "" && writes(u.Config):
				runs[i].Result = notRun(version, u, result.ReasonDependencyNotReady, blockedMessage(u, blockedBy[i], reverse), now)
			case u.Suspend:
				runs[i].Result = notRun(version, u, result.ReasonSuspended, "suspended: not run", now)
			case ctx.Err() != nil:
				runs[i].Result = notRun(version, u, result.ReasonCancelled, "cancelled before it started", now)
			default:
				running++
				runs[i].Start = now
				go func() {
					res := run(ctx, u, !reverse && len(next[i]) > 0)
					runs[i].Result, runs[i].End = res, time.Now()
					done <- i
				}()
				continue
			}
			runs[i].Start, runs[i].End = now, now
			finish(i)
		}
		if finished == n {
			break
		}
		if running == 0 {
			// Only a cycle leaves units waiting with none running;
			// checkGraph refuses cycles before a run starts.
			for i := range runs {
				if runs[i].Result == nil {
					runs[i].Result = notRun(version, units[i], result.ReasonDependencyNotReady, "not run: its dependencies form a cycle", time.Now())
				}
			}
			break
		}
		i := <-done
		running--
		finish(i)
	}
	return runs
}

// reachedGoal says whether a unit's dependents may go: it succeeded, or
// a diff found changes, or it was suspended (they wait for nothing from it).
func reachedGoal(r *result.Result) bool {
	return r.Reason.Succeeded() || r.Reason == result.ReasonProgressing || r.Reason == result.ReasonSuspended
}

// writes says whether a unit's command changes a cluster: its dependents
// must not run when it failed. A preview writes nothing and depends on no
// unit's outcome but for what it shows.
func writes(cfg *config.Config) bool {
	switch cfg.Command {
	case "diff", "validate":
		return false
	case "drift":
		return cfg.Correct
	}
	return true
}

func blockedMessage(u *config.Unit, by string, reverse bool) string {
	if reverse {
		return fmt.Sprintf("not deleted: %s, which depends on it, was not deleted", by)
	}
	return fmt.Sprintf("not run: it depends on %s, which did not succeed", by)
}

// notRun is the result of a unit that was not run.
func notRun(version string, u *config.Unit, reason result.Reason, message string, at time.Time) *result.Result {
	return &result.Result{Schema: result.SchemaVersion, Command: u.Config.Command, Version: version,
		Started: at, Finished: at, Reason: reason, Message: message,
		Stages: []result.Stage{}, Objects: []result.Object{}}
}
