package schedule

import (
	"testing"
	"time"
)

func BenchmarkNextCronBerlin(b *testing.B) {
	s := mustParse(b, "cron", "*/5 * * * *", "Europe/Berlin", "")
	after := time.Date(2026, 5, 1, 10, 2, 0, 0, time.UTC)
	for b.Loop() {
		s.Next(after)
	}
}

func BenchmarkNextCronUTC(b *testing.B) {
	s := mustParse(b, "cron", "*/5 * * * *", "", "")
	after := time.Date(2026, 5, 1, 10, 2, 0, 0, time.UTC)
	for b.Loop() {
		s.Next(after)
	}
}

func BenchmarkNextCronNever(b *testing.B) {
	c, _, err := parseCron("0 0 30 2 *") // Parse refuses it; Next must still end
	if err != nil {
		b.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	s := &Spec{Kind: KindCron, cron: c, Location: berlin}
	after := time.Date(2026, 5, 1, 10, 2, 0, 0, time.UTC)
	for b.Loop() {
		s.Next(after)
	}
}

func BenchmarkParseCron(b *testing.B) {
	for b.Loop() {
		Parse("cron", "5-50/10 8-18/2 L,15W jan-MAR MON-FRI", "", "")
	}
}

func BenchmarkDueCronCap(b *testing.B) {
	s := mustParse(b, "cron", "* * * * *", "Europe/Berlin", "")
	next := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		s.Due(next, next.AddDate(1, 0, 0), CatchUpNone)
	}
}
