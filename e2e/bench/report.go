package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/capgate/capgate/internal/timeline"
)

// Tables printed after each benchmark, in BENCHMARKS.md's layout.

func ms(d time.Duration) string {
	switch {
	case d < 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
}

func us(d time.Duration) string { return fmt.Sprintf("%d", d.Microseconds()) }

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func table(w io.Writer, title string, header []string, rows [][]string) {
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
}

// rebalanceTable prints every run; pauses are timeline.Pause (raw) and
// beyond the holder's steady state; ratios are each run's join-to-stable
// and longest moved pause over capgate's first run.
func rebalanceTable(w io.Writer, title string, runs []rebalanceRun) {
	var base *rebalanceRun
	for i := range runs {
		if runs[i].Params.Protocol.Kafka == nil {
			base = &runs[i]
			break
		}
	}
	header := []string{"protocol", "moved", "moved pause p50", "moved pause max", "moved beyond p50", "moved beyond max", "unmoved pause max", "unmoved beyond p50", "unmoved beyond max",
		"steady worst", "join→newcomer", "join→stable", "stable/capgate", "pause/capgate", "dups", "lost"}
	var rows [][]string
	for _, r := range runs {
		stable, stableRatio := "never", "—"
		if r.Stable {
			stable = ms(r.JoinToStable)
			if base != nil && base.Stable {
				stableRatio = ratio(float64(r.JoinToStable), float64(base.JoinToStable))
			}
		}
		pauseRatio := "—"
		if base != nil {
			pauseRatio = ratio(float64(r.MovedPause.Max), float64(base.MovedPause.Max))
		}
		rows = append(rows, []string{r.Params.Protocol.Name, fmt.Sprint(len(r.Moved)), ms(r.MovedPause.P50), ms(r.MovedPause.Max), ms(r.MovedExtra.P50), ms(r.MovedExtra.Max),
			ms(r.UnmovedPause.Max), ms(r.UnmovedExtra.P50), ms(r.UnmovedExtra.Max), ms(r.SteadyMax), ms(r.NewcomerFirst), stable, stableRatio, pauseRatio,
			fmt.Sprint(r.Duplicates), fmt.Sprint(r.Lost)})
	}
	table(w, title+" (ms; pause: timeline.Pause; beyond: minus the holder's steady worst gap)", header, rows)
}

// loadRow is one open-loop run of one path.
type loadRow struct {
	Path string
	loadResult
}

func loadTable(w io.Writer, rows []loadRow) {
	direct := map[float64]loadResult{}
	for _, r := range rows {
		if r.Path == "direct" {
			direct[r.Rate] = r.loadResult
		}
	}
	header := []string{"rate/s", "path", "achieved/s", "p50 µs", "p99 µs", "max µs", "p50 over direct µs", "p99 over direct µs", "failed", "dropped"}
	var out [][]string
	for _, r := range rows {
		over50, over99 := "—", "—"
		if d, ok := direct[r.Rate]; ok && r.Path != "direct" {
			over50, over99 = fmt.Sprint((r.P50 - d.P50).Microseconds()), fmt.Sprint((r.P99 - d.P99).Microseconds())
		}
		out = append(out, []string{fmt.Sprint(r.Rate), r.Path, fmt.Sprintf("%.0f", r.Achieved), us(r.P50), us(r.P99), us(r.Max), over50, over99,
			fmt.Sprint(r.Failed), fmt.Sprint(r.Dropped)})
	}
	table(w, "Open-loop 1-record fetches, direct (broker.Client.Fetch) vs through the gateway (JSON)", header, out)
}

// partitionTable prints one run partition by partition, times relative
// to the join (set CAPGATE_BENCH_DETAIL=1).
func partitionTable(w io.Writer, r rebalanceRun) {
	all := append(append([]timeline.Partition(nil), r.Moved...), r.Unmoved...)
	slices.SortFunc(all, func(a, b timeline.Partition) int { return int(a.Partition - b.Partition) })
	var rows [][]string
	for _, p := range all {
		stable := "never"
		if !p.StableAt.IsZero() {
			stable = ms(p.StableAt.Sub(r.Window.JoinAt))
		}
		rows = append(rows, []string{fmt.Sprint(p.Partition), p.From, p.To, ms(p.Pause), ms(p.Steady), ms(p.Extra), stable})
	}
	table(w, r.Params.Protocol.Name+" partition by partition", []string{"partition", "from", "to", "pause", "steady", "beyond", "stable at"}, rows)
}
