package config_test

import (
	"fmt"

	"github.com/errandhq/errand/internal/config"
)

// Parse reports every problem at once, each naming its key.
func ExampleParse() {
	_, err := config.Parse([]byte(`
workers: 0
lease_ttl: 90
agents:
  shell:
    kind: exec
    max_step: 5
`))
	fmt.Println(err)
	// Output:
	// lease_ttl: "90" has no unit: write a duration like 90s, 5m or 720h (line 3)
	// agents.shell.max_step: unknown key (did you mean max_steps?) (line 7)
	// workers: must be at least 1
	// agents.shell.command: required for kind exec
}

func ExampleConfig_ApplyEnv() {
	cfg := config.Default()
	env := map[string]string{"ERRAND_WORKERS": "8", "ERRAND_HOME": "/srv/errand"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := cfg.ApplyEnv(lookup); err != nil {
		fmt.Println(err)
		return
	}
	home, _ := config.Home(lookup)
	fmt.Println(cfg.Workers, cfg.StoreDSN(home), cfg.ServerURL())
	// Output:
	// 8 sqlite:///srv/errand/errand.db http://127.0.0.1:7780
}
