package tasktemplate

// Debounce is a submit's "debounce": {"key", "period"}: submits with the
// same key within period (a duration such as "5s") collapse into one
// task, the last, whose id every caller gets.
type Debounce struct {
	Key    string `json:"key"`
	Period string `json:"period"`
}
