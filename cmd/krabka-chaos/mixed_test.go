package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/chaos"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// pinnedRelease is the previous release that TestMixedReleases runs beside
// this one: e381611 ("docs/performance.md: the holder's own parked Fetch in
// the handover's gap above its floor", 2026-12-05), the last commit of main
// that CI passed before the mixed-release test existed. The repository
// has no release tags, so the pin is a commit; move it to the last commit
// a release shipped from when there is one. KRABKA_MIXED_RELEASE=<commit>
// runs the test against another commit instead.
const pinnedRelease = "e3816115672035b9ce55870e51b0fb30546fc80b"

// The timings of the mixed run: a lease long enough that a lapse (the
// rest of the lease, then the stagger) and a handover (a tombstone, then an
// immediate challenge) differ by seconds.
const (
	mixedLease   = 6 * time.Second
	mixedRenew   = 2 * time.Second
	mixedStagger = time.Second
)

// TestMixedReleases runs members of the previous release (pinnedRelease)
// and of this one on one role and one state topic of the real broker of
// KRABKA_KAFKA_BROKERS, through a rolling upgrade and a rollback, and
// checks the run with the fault harness's checker and Porcupine.
//
// The members of both releases run the fault harness's member
// (krabka-chaos member) of this tree: the previous release's members are
// that harness built against the package coordination of pinnedRelease
// (git archive of the commit, with this tree's internal/chaos and
// cmd/krabka-chaos laid over it), as a user's program is rebuilt on the
// library's next release. Their logs are then of one format, which the
// checker of this tree reads.
//
// Three members start on the previous release. The upgrade restarts each
// on this release, one at a time, the holder last; the rollback restarts
// each on the previous release, the holder last. The test asserts: no
// violation, no lost command, a history that linearizes; every record of
// the state topic decodes to the same fields on both releases, and so does
// the frozen corpus coordination/testdata/records.json; each restart of
// the holder is a handover (a lease tombstone before the next holder's
// lease, within its deadline, the gap well below a lease), to the first
// standby of the roster, a member of the other release; and exactly those
// two changes of holder, so no failback. The rollback's holder (this
// release) hands over with Leadership.TransferTo to the last standby
// instead (checkTransferStep): a target and a bystander of the previous
// release (docs/upgrades.md, "A planned transfer in a mixed roster").
func TestMixedReleases(t *testing.T) {
	started := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	release := pinnedRelease
	if pin := os.Getenv("KRABKA_MIXED_RELEASE"); pin != "" {
		out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", pin+"^{commit}").Output()
		if err != nil {
			t.Fatalf("KRABKA_MIXED_RELEASE=%s names no commit of the repository: %v", pin, err)
		}
		release = strings.TrimSpace(string(out))
		t.Logf("KRABKA_MIXED_RELEASE: the previous release is %s, not the pinned %s", release, pinnedRelease[:7])
	}
	old := extractRelease(t, root, release)
	overlayHarness(t, root, old)
	bin := t.TempDir()
	oldMember := goBuild(t, old, "./cmd/krabka-chaos", filepath.Join(bin, "krabka-chaos-old"))
	oldDecode := goBuild(t, old, "./internal/chaos/decodestate", filepath.Join(bin, "decodestate-old"))
	newMember := goBuild(t, root, "./cmd/krabka-chaos", filepath.Join(bin, "krabka-chaos-new"))

	t.Run("corpus", func(t *testing.T) {
		checkCorpusOnRelease(t, oldDecode, release, filepath.Join(root, "coordination", "testdata", "records.json"))
	})

	t.Logf("built the members of %s and of this tree in %s", release[:7], time.Since(started).Round(time.Second))

	cluster := kafkatest.Kafka(t)
	dir := t.TempDir()
	runStarted := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress strings.Builder
	run, err := chaos.OrchestrateMixed(ctx, chaos.MixedConfig{
		Brokers: cluster.Brokers, Old: oldMember, New: newMember, Members: 3,
		Lease: mixedLease, Renew: mixedRenew, Stagger: mixedStagger, Poll: 250 * time.Millisecond,
		CommandInterval: 100 * time.Millisecond, WriteTimeout: 5 * time.Second,
		// A rolling restart is a step-down of each holder in turn; the
		// resignation anchor hands it to the first standby, as krabka-coord
		// elect and run do. Without it every standby challenges at once
		// after the tombstone (the specification's rule 3 anchors on
		// registrations long past), and the role may change hands twice.
		ResignationAnchor: true,
		// The rollback's holder (this release) hands the role to the last
		// standby (the previous release) with Leadership.TransferTo; the
		// first standby, of the previous release too, must not preempt it.
		Transfer: true,
		Hold:     2 * time.Second, Dir: dir, Progress: &progress,
	})
	t.Logf("progress (%s):\n%s", time.Since(runStarted).Round(time.Second), progress.String())
	if err != nil {
		keepRunDir(t, dir)
		t.Fatalf("mixed run: %v", err)
	}
	summary, err := chaos.CheckRun(ctx, dir, nil, 30*time.Second)
	if err != nil {
		keepRunDir(t, dir)
		t.Fatalf("check: %v", err)
	}
	r := summary.Report
	for _, v := range r.Violations {
		t.Errorf("violation %s in role %s at offset %d: %s", v.Kind, v.Role, v.Offset, v.Detail)
	}
	for _, lost := range r.Lost {
		t.Errorf("lost acknowledged command %s", lost)
	}
	if r.Acknowledged == 0 {
		t.Error("no command was acknowledged")
	}
	if l := r.Linearizability; l.Result != chaos.LinearOK {
		t.Errorf("linearizability check: %s over %d operations: %v", l.Result, l.Ops, l.Detail)
	}
	t.Logf("checker: %d commands acknowledged, %d found, %d violations, %d lost, %d leadership changes, %d lease terms; Porcupine %s over %d operations",
		r.Acknowledged, r.Commands, len(r.Violations), len(r.Lost), r.LeadershipChanges, r.LeaseTerms, r.Linearizability.Result, r.Linearizability.Ops)

	// Every record of the role's partition of the state topic, read
	// read_committed as the members read it.
	role, err := coordination.NewRole(run.Info.Roles[0])
	if err != nil {
		t.Fatal(err)
	}
	tp, err := coordination.RoleTopicPartition(role, coordination.WithTopic(run.Info.StateTopic), coordination.WithPartitions(run.Info.StatePartitions))
	if err != nil {
		t.Fatal(err)
	}
	read, err := chaos.ReadCommitted(ctx, cluster.Brokers, run.Info.StateTopic, int32(tp.Partition), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	records := make([]coordination.StateRecord, len(read))
	for i, rec := range read {
		records[i] = coordination.StateRecord{Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp.UnixMilli()}
	}
	t.Run("state records decode on both releases", func(t *testing.T) { checkStateOnRelease(t, oldDecode, release, records) })

	all, err := chaos.Handovers(role, records)
	if err != nil {
		t.Fatal(err)
	}
	// The changes from the settled first leadership on: the first election
	// of members that start together is no part of the upgrade.
	var handovers []chaos.Handover
	for _, h := range all {
		if h.LeaseMillis < run.Info.StartMillis {
			t.Logf("a change in the first election, before the first restart: %s", h)
			continue
		}
		handovers = append(handovers, h)
	}
	var holderSteps []chaos.MixedStep
	for _, step := range run.Steps {
		if step.Holder {
			holderSteps = append(holderSteps, step)
		}
	}
	for _, h := range handovers {
		t.Logf("handover %s", h)
	}
	if len(holderSteps) != 2 {
		t.Fatalf("%d restarts of the holder, want 2 (one in the upgrade, one in the rollback): %+v", len(holderSteps), run.Steps)
	}
	// Exactly one change of holder per restart of the holder: a change
	// more is a failback or a needless failover.
	if len(handovers) != len(holderSteps) {
		t.Errorf("%d changes of the leaseholder in the state topic, want %d (one per restart of the holder)", len(handovers), len(holderSteps))
	}
	for i, step := range holderSteps {
		if i >= len(handovers) {
			break
		}
		h := handovers[i]
		if h.From != step.Member || h.To != step.Successor {
			t.Errorf("%s: the state topic hands the role from %s to %s; the run restarted holder %s and saw %s take over", step.Phase, h.From, h.To, step.Member, step.Successor)
		}
		if step.Successor == step.Member {
			t.Errorf("%s: holder %s took the role back after its restart (failback)", step.Phase, step.Member)
		}
		if step.TransferTo != "" {
			checkTransferStep(t, role, records, step, h)
			continue
		}
		if step.Successor != step.FirstStandby {
			t.Errorf("%s: %s took the role from %s; the first standby of the roster was %s (the resignation anchor hands over in rank order)", step.Phase, step.Successor, step.Member, step.FirstStandby)
		}
		if step.SuccessorRelease != step.To {
			t.Errorf("%s: the successor %s runs the %s release, want the %s release (the holder restarts last)", step.Phase, step.Successor, step.SuccessorRelease, step.To)
		}
		if !h.Tombstone {
			t.Errorf("%s: no lease tombstone between %s's last lease and %s's first: the lease lapsed instead of a handover (%s)", step.Phase, h.From, h.To, h)
			continue
		}
		if h.TombstoneMillis >= h.FromDeadline {
			t.Errorf("%s: the tombstone came at or after the deadline of %s's lease: a lapse, not a handover (%s)", step.Phase, h.From, h)
		}
		if limit := mixedLease / 4; time.Duration(h.GapMillis)*time.Millisecond > limit {
			t.Errorf("%s: %s took the role %d ms after the tombstone; a handover takes well below a lease (%s), want at most %s", step.Phase, h.To, h.GapMillis, mixedLease, limit)
		}
	}
	if t.Failed() {
		keepRunDir(t, dir)
	}
}

// checkTransferStep checks the restart of a holder that handed the role
// over with Leadership.TransferTo (issue 31): to the member it named, of
// the previous release, which is not the first standby (so the first
// standby, of the previous release too, did not preempt it); with no lease
// tombstone but an offer (a lease that names the target under the
// holder's token), then the target's own lease under a newer token within
// the transfer's bound (3 s with the run's timings).
func checkTransferStep(t *testing.T, role coordination.Role, records []coordination.StateRecord, step chaos.MixedStep, h chaos.Handover) {
	t.Helper()
	if step.Successor != step.TransferTo || step.TransferTo == step.FirstStandby {
		t.Errorf("%s: %s took the role from %s, which named %s (the first standby was %s): want the named member, behind the first standby", step.Phase, step.Successor, step.Member, step.TransferTo, step.FirstStandby)
	}
	if h.Tombstone {
		t.Errorf("%s: a lease tombstone in the transfer from %s: want an offer (%s)", step.Phase, h.From, h)
	}
	var offer, taken *coordination.Lease
	var offerAt, takenAt int64
	for _, r := range records {
		key, err := coordination.DecodeKey(r.Key)
		if err != nil || key.Role != role || key.Kind != coordination.KindLease || r.Offset < h.ToOffset || coordination.IsTombstone(r.Value) {
			continue
		}
		lease, err := coordination.DecodeLease(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if offer == nil {
			offer, offerAt = &lease, r.Timestamp
			continue
		}
		taken, takenAt = &lease, r.Timestamp
		break
	}
	switch {
	case offer == nil || offer.Member.String() != step.TransferTo:
		t.Errorf("%s: the lease record at the handover is %+v, want an offer to %s", step.Phase, offer, step.TransferTo)
	case taken == nil || taken.Member.String() != step.TransferTo || !taken.Token.Supersedes(offer.Token):
		t.Errorf("%s: after the offer under %s came %+v, want %s's own lease under a newer token", step.Phase, offer.Token, taken, step.TransferTo)
	default:
		t.Logf("%s: %s (this release) transferred to %s (%s): the offer under %s, then its lease under %s %d ms later",
			step.Phase, step.Member, step.TransferTo, step.SuccessorRelease, offer.Token, taken.Token, takenAt-offerAt)
		if gap := time.Duration(takenAt-offerAt) * time.Millisecond; gap > 3*time.Second {
			t.Errorf("%s: %s took the offer %v after it was written, past the transfer's bound of 3 s", step.Phase, step.TransferTo, gap)
		}
	}
}

// extractRelease writes the tree of a commit of the repository at root
// into a new directory (git archive), and fails the test, saying why, when
// the commit is not in the repository.
func extractRelease(t *testing.T, root, commit string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "release-"+commit[:7])
	if err := releaseTree(root, commit, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// releaseTree writes the tree of a commit of the repository at root into
// dir, and returns an error that says what to do when the commit is not in
// the repository.
func releaseTree(root, commit, dir string) error {
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("the pinned previous release %s is not in the repository at %s (%v: %s): the mixed-release test builds it from the git history; "+
			"in a shallow clone run `git fetch --unshallow` (or fetch that commit), and after a rewrite of history move pinnedRelease in %s",
			commit, root, err, bytes.TrimSpace(out), "cmd/krabka-chaos/mixed_test.go")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	extract := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var archiveErr, extractErr bytes.Buffer
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := archive.Start(); err != nil {
		return err
	}
	if err := extract.Run(); err != nil {
		_ = archive.Wait()
		return fmt.Errorf("tar -x of git archive %s: %w: %s", commit, err, extractErr.String())
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, archiveErr.String())
	}
	return nil
}

// TestMixedReleasesNamesAMissingPin: a repository without the pinned
// commit (a shallow clone, a rewritten history) fails the mixed-release
// test with a message that names the commit and the way out, not with an
// error of git archive.
func TestMixedReleasesNamesAMissingPin(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	const absent = "0123456789abcdef0123456789abcdef01234567"
	err = releaseTree(root, absent, filepath.Join(t.TempDir(), "release"))
	if err == nil {
		t.Fatalf("releaseTree(%s) succeeded; want an error", absent)
	}
	for _, want := range []string{absent, "is not in the repository", "git fetch --unshallow", "pinnedRelease"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// overlayHarness replaces the fault harness of the release tree at dst
// (internal/chaos and cmd/krabka-chaos, which are modules of their own)
// with this tree's, so that the members of both releases run one harness
// over two releases of the library; internal/kafkacodes, a package of the
// library's module that the harness imports and no library file does,
// comes with it.
func overlayHarness(t *testing.T, root, dst string) {
	t.Helper()
	for _, module := range []string{"internal/chaos", "cmd/krabka-chaos", "internal/kafkacodes"} {
		if _, err := os.Stat(filepath.Join(root, module)); errors.Is(err, fs.ErrNotExist) && module == "internal/kafkacodes" {
			continue // a tree before the request faults' table of codes
		}
		target := filepath.Join(dst, module)
		if err := os.RemoveAll(target); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(target, os.DirFS(filepath.Join(root, module))); err != nil {
			t.Fatalf("copy %s into the release tree: %v", module, err)
		}
	}
}

// goBuild builds a package of the module tree at dir into out, in the
// workspace of that tree (its go.work), with -trimpath, so that the
// build cache serves a later run from another temporary directory.
func goBuild(t *testing.T, dir, pkg, out string) string {
	t.Helper()
	build := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"))
	if output, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in %s: %v\n%s", pkg, dir, err, output)
	}
	return out
}

// decodeOnRelease feeds records to a decodestate binary and returns what
// it decoded, one per record.
func decodeOnRelease(t *testing.T, decoder string, keys, values [][]byte) []chaos.DecodedRecord {
	t.Helper()
	var input bytes.Buffer
	encoder := json.NewEncoder(&input)
	for i := range keys {
		line := map[string]any{"key": hex.EncodeToString(keys[i]), "value": nil}
		if values[i] != nil {
			line["value"] = hex.EncodeToString(values[i])
		}
		if err := encoder.Encode(line); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(decoder)
	cmd.Stdin = &input
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	output, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", decoder, err, stderr.String())
	}
	var out []chaos.DecodedRecord
	scanner := bufio.NewScanner(bytes.NewReader(output))
	scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for scanner.Scan() {
		var d chaos.DecodedRecord
		if err := json.Unmarshal(scanner.Bytes(), &d); err != nil {
			t.Fatalf("%s: output line %d: %v", decoder, len(out)+1, err)
		}
		out = append(out, d)
	}
	if len(out) != len(keys) {
		t.Fatalf("%s decoded %d records of %d", decoder, len(out), len(keys))
	}
	return out
}

// jsonText renders a decoded record for comparison and messages.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkCorpusOnRelease decodes the frozen corpus with the release's
// decoder and compares each record with the corpus's fields.
func checkCorpusOnRelease(t *testing.T, decoder, release, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Records []struct {
			What  string  `json:"what"`
			Key   string  `json:"key"`
			Value *string `json:"value"`
			chaos.DecodedRecord
		} `json:"records"`
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(corpus.Records) == 0 {
		t.Fatalf("%s holds no record", path)
	}
	keys, values := make([][]byte, len(corpus.Records)), make([][]byte, len(corpus.Records))
	for i, r := range corpus.Records {
		if keys[i], err = hex.DecodeString(r.Key); err != nil {
			t.Fatalf("%s: %v", r.What, err)
		}
		if r.Value != nil {
			if values[i], err = hex.DecodeString(*r.Value); err != nil {
				t.Fatalf("%s: %v", r.What, err)
			}
			if values[i] == nil {
				values[i] = []byte{}
			}
		}
	}
	decoded := decodeOnRelease(t, decoder, keys, values)
	for i, r := range corpus.Records {
		if got, want := jsonText(t, decoded[i]), jsonText(t, r.DecodedRecord); got != want {
			t.Errorf("%s: release %s decodes\n\t%s\nthe corpus says\n\t%s", r.What, release[:7], got, want)
		}
	}
	t.Logf("release %s decodes the %d records of %s as the corpus says", release[:7], len(corpus.Records), filepath.Base(path))
}

// checkStateOnRelease decodes the records with this build and with the
// release's decoder, and asserts that both decode every record, to the
// same fields.
func checkStateOnRelease(t *testing.T, decoder, release string, records []coordination.StateRecord) {
	if len(records) == 0 {
		t.Fatal("the state partition holds no record")
	}
	keys, values := make([][]byte, len(records)), make([][]byte, len(records))
	for i, r := range records {
		keys[i], values[i] = r.Key, r.Value
	}
	old := decodeOnRelease(t, decoder, keys, values)
	kinds := map[string]int{}
	for i, r := range records {
		here := chaos.DecodeStateRecord(r.Key, r.Value)
		if here.Error != "" {
			t.Errorf("offset %d: this release does not decode the record: %s", r.Offset, here.Error)
		}
		if old[i].Error != "" {
			t.Errorf("offset %d: release %s does not decode the record: %s", r.Offset, release[:7], old[i].Error)
		}
		if a, b := jsonText(t, here), jsonText(t, old[i]); a != b {
			t.Errorf("offset %d: this release decodes %s, release %s %s", r.Offset, a, release[:7], b)
		}
		kind := here.Kind
		if here.Tombstone {
			kind += " tombstone"
		}
		kinds[kind]++
	}
	t.Logf("%d state records decode alike on both releases: %v", len(records), kinds)
	for _, want := range []string{"registration", "registration tombstone", "lease", "lease tombstone"} {
		if kinds[want] == 0 {
			t.Errorf("the run wrote no %s record; the rolling upgrade writes every one of them", want)
		}
	}
}

// keepRunDir keeps the run directory of a failed run for inspection.
func keepRunDir(t *testing.T, dir string) {
	t.Helper()
	kept, err := os.MkdirTemp("", "krabka-mixed-")
	if err != nil {
		return
	}
	if err := os.CopyFS(kept, os.DirFS(dir)); err != nil && !errors.Is(err, os.ErrExist) {
		return
	}
	t.Logf("run directory kept for inspection: %s", kept)
}
