package result

// Label is how reports of command name the action: a diff previews, so
// it says what an apply would do ("to create", "to configure"); every
// other command says what happened ("created", "configured").
func (a Action) Label(command string) string {
	if command == "diff" {
		switch a {
		case Created:
			return "to create"
		case Configured:
			return "to configure"
		case Recreated:
			return "to recreate"
		case Deleted:
			return "to delete"
		}
	}
	return string(a)
}

// Labels are the labels of actions, as command's reports name them.
func Labels(command string, actions []Action) []string {
	out := make([]string, len(actions))
	for i, a := range actions {
		out[i] = a.Label(command)
	}
	return out
}
