// Package kubernetes is the Kubernetes backend: one hardened Pod per
// environment, whose only container runs the guest (PID 1, `agentbox-guest
// guest --sandboxed --await-host`, or agentbox itself where the image has
// no agentbox-guest of its build) and speaks the wire protocol over the
// Pod's attach stream (client-go's remotecommand: WebSocket where the
// server supports it, SPDY otherwise). A cluster cannot mount the host's
// binary, so the guest is layered into the image at build time (`agentbox
// image build --guest`), under a tag keyed by the binaries' hashes
// (images.GuestKey, images.GuestRef). A NetworkPolicy denying all traffic to and from
// agentbox's pods is created with them. Only this package may import
// client-go.
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/images"
)

// Name is the backend's registered name.
const Name = "kubernetes"

// DefaultImage is the image whose guest-carrying variant runs by default.
const DefaultImage = "agentbox/runtime:bookworm"

// NamespaceEnv names the namespace agentbox's pods go to when the CLI's
// --namespace is not given: the CLI reads it as that flag's default and
// passes the namespace in environment.Options; the backend never reads it.
// Empty means the kubeconfig context's namespace (or the Pod's own
// namespace in a cluster), else "default".
const NamespaceEnv = "AGENTBOX_K8S_NAMESPACE"

// DeadlineEnv overrides the Pods' activeDeadlineSeconds (a Go duration).
const DeadlineEnv = "AGENTBOX_K8S_ACTIVE_DEADLINE"

// DefaultDeadline is the Pods' activeDeadlineSeconds: a backstop. A Pod
// ends by itself as soon as its attach stream does (the guest's stdin
// closes when agentbox exits, however it exits); the deadline ends one
// whose stream hangs on a partitioned network.
const DefaultDeadline = 6 * time.Hour

func init() {
	environment.Register(Name, func(opts environment.Options) (environment.Backend, error) {
		if err := CheckSpread(opts.Spread); err != nil {
			return nil, err
		}
		return &Backend{Namespace: opts.Namespace, Spread: opts.Spread}, nil
	})
}

// Backend creates Kubernetes environments.
type Backend struct {
	// Namespace of the Pods; empty: the kubeconfig context's.
	Namespace string
	// Deadline is the Pods' activeDeadlineSeconds; zero: DeadlineEnv,
	// then DefaultDeadline.
	Deadline time.Duration
	// Kubeconfig is the kubeconfig file; empty: KUBECONFIG, then
	// ~/.kube/config, then the in-cluster configuration.
	Kubeconfig string
	// Spread is how the Pods this Backend creates (one eval's) spread
	// over the nodes: SpreadSoft (the default, for ""), SpreadHard or
	// SpreadNone.
	Spread string

	groupOnce sync.Once
	group     string // LabelGroup's value for this Backend's Pods
}

// How a Backend's Pods spread over the nodes: a topology spread
// constraint over kubernetes.io/hostname, keyed by LabelGroup (one value
// per Backend, that is per eval or run), with a skew of at most one Pod.
const (
	// SpreadSoft prefers the node with the fewest of the group's Pods
	// (whenUnsatisfiable: ScheduleAnyway): a full or tainted node never
	// keeps a Pod from starting elsewhere.
	SpreadSoft = "soft"
	// SpreadHard requires it (DoNotSchedule); cordoned and tainted nodes
	// (drained, NotReady) do not count (nodeTaintsPolicy: Honor).
	SpreadHard = "hard"
	// SpreadNone leaves placement to the scheduler alone.
	SpreadNone = "none"
)

// SpreadEnv is the CLI's default for --spread.
const SpreadEnv = "AGENTBOX_K8S_SPREAD"

// CheckSpread says whether s is a spreading mode ("" is SpreadSoft).
func CheckSpread(s string) error {
	switch s {
	case "", SpreadSoft, SpreadHard, SpreadNone:
		return nil
	}
	return fmt.Errorf("spread %q: want %s, %s or %s", s, SpreadSoft, SpreadHard, SpreadNone)
}

// groupLabel is the value of LabelGroup on this Backend's Pods: random,
// made once.
func (b *Backend) groupLabel() string {
	b.groupOnce.Do(func() { b.group = "g" + randomSuffix() + randomSuffix() })
	return b.group
}

var (
	_ environment.Backend = (*Backend)(nil)
	_ environment.Capable = (*Backend)(nil)
)

// Name implements environment.Backend.
func (*Backend) Name() string { return Name }

// Capabilities implements environment.Capable: images of the user's choice
// (carrying the guest), RuntimeClasses for --runtime, reaping by label, the
// container's CPU and memory limits, the seed-style step (by exec), and a
// network by policy (its connections carried over the attach stream to
// the proxy on this host: guestenv.CarryNetwork).
// Not: freezing (Kubernetes has no pause), a process limit per Pod (only
// the kubelet's podPidsLimit, the same for every Pod of a node).
func (*Backend) Capabilities() environment.Capabilities {
	return environment.Capabilities{
		Images:     true,
		OCIRuntime: true,
		Reap:       true,
		Limits:     environment.Limits{CPU: true, Memory: true},
		SeedStep:   true,
		Network:    true,
		// The same images and guest as docker's: libfaketime in the
		// runtime image, moved by the guest.
		VirtualClock: true,
		Relaunch:     true, // the guest's reset, as on Docker; the conformance suite's RelaunchFloor runs its kill on the cluster (it found the small guest missing from the guest's sandbox inits, 2026-12-06)
	}
}

// cluster is a connection to the API server.
type cluster struct {
	cfg       *rest.Config
	cs        *kubernetes.Clientset
	namespace string
	host      string // the API server, for messages
}

// connect loads the client configuration (Kubeconfig, KUBECONFIG,
// ~/.kube/config, in-cluster) and the namespace. It does not contact the
// server.
func (b *Backend) connect() (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if b.Kubeconfig != "" {
		rules.ExplicitPath = b.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("%w: kubernetes: no cluster configured: set KUBECONFIG or write ~/.kube/config (or run agentbox in a Pod); see `agentbox doctor --backend kubernetes`", environment.ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: kubernetes: client configuration: %w", environment.ErrUnavailable, err)
	}
	ns := b.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	// An eval's Pods are created, watched and deleted in parallel.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "agentbox"
	cfg.WarningHandler = rest.NoWarnings{} // not on the user's terminal, mid-run
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: kubernetes: %w", environment.ErrUnavailable, err)
	}
	return &cluster{cfg: cfg, cs: cs, namespace: ns, host: cfg.Host}, nil
}

// ping checks that the API server answers (within ctx and 10 s).
func (c *cluster) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.cs.Discovery().RESTClient().Get().AbsPath("/version").Do(pctx).Raw()
	if err != nil {
		return fmt.Errorf("%w: kubernetes: the API server at %s does not answer: %w", environment.ErrUnavailable, c.host, err)
	}
	return nil
}

func (b *Backend) deadline() time.Duration {
	if b.Deadline > 0 {
		return b.Deadline
	}
	if d, err := time.ParseDuration(os.Getenv(DeadlineEnv)); err == nil && d > 0 {
		return d
	}
	return DefaultDeadline
}

// GuestBinary resolves the agentbox binary whose guest image a Pod runs
// (see guestenv.WholeBinary: the whole agentbox, as `agentbox image build
// --guest` layers it, since serve in the cluster runs from that image):
// statically linked, since the image's libc is not the host's.
func GuestBinary(path string) (string, error) {
	return guestenv.WholeBinary(path, guestenv.Static)
}

// guestBinaries resolves what the guest image a Pod runs carries (see
// guestenv.ImageBinaries): GuestBinary, and agentbox-guest of its build
// beside it if there is one, both statically linked.
func guestBinaries(path string) (guestenv.ImageGuest, error) {
	return guestenv.ImageBinaries(path, guestenv.Static)
}

// podGuest is what a Pod runs for a Config: the guest image and, in it,
// the guest's binary.
type podGuest struct {
	base  string // the image named: cfg.Image, or DefaultImage
	ref   string // the guest image the Pod runs
	id    string // its key (images.GuestKey), the Pod's AnnotationGuest
	small bool   // the Pod runs agentbox-guest (images.GuestSmallPath), not agentbox
	about string // what the Pod runs and why (doctor)
}

// command is the guest's command line: PID 1 of the Pod's container.
func (g podGuest) command() []string {
	bin := images.GuestPath
	if g.small {
		bin = images.GuestSmallPath
	}
	return []string{bin, "guest", "--sandboxed", "--await-host"}
}

// guestImage is what a Pod runs for cfg: the guest-carrying variant of
// cfg.Image (or DefaultImage) for the guest binaries, keyed by both
// (images.GuestKey), whose agentbox-guest the Pod runs when the key
// covers one — the agentbox and the image then agree on both binaries,
// since the same pair gives the same key on the host and in the image
// (serve in a cluster). Without agentbox-guest of its build beside it, the
// key is the agentbox binary's alone, and the Pod runs agentbox itself.
// --image naming the image of this agentbox alone (its -guest-HASH tag,
// made where no agentbox-guest was beside it) is taken as it is, and its
// Pods run agentbox too.
func guestImage(cfg environment.Config) (podGuest, error) {
	g := podGuest{base: cfg.Image}
	if g.base == "" {
		g.base = DefaultImage
	}
	bins, err := guestBinaries(cfg.GuestBinary)
	if err != nil {
		return podGuest{}, err
	}
	if g.id, err = guestKey(bins.Whole, bins.Small); err != nil {
		return podGuest{}, fmt.Errorf("%w: %w", environment.ErrGuest, err)
	}
	g.ref, g.small = images.GuestRef(g.base, g.id), bins.Small != ""
	if g.small && g.ref != g.base && strings.Contains(g.base, "-guest-") {
		whole, err := guestKey(bins.Whole, "")
		if err != nil {
			return podGuest{}, fmt.Errorf("%w: %w", environment.ErrGuest, err)
		}
		if images.GuestRef(g.base, whole) == g.base {
			g.ref, g.id, g.small = g.base, whole, false
			g.about = fmt.Sprintf("the Pods run agentbox itself as the guest (%s guest) from %s: --image names the image of %s alone (`agentbox image build --guest` makes the one that carries %s too, whose Pods start quicker)", images.GuestPath, g.ref, bins.Whole, bins.Small)
			return g, nil
		}
	}
	if g.small {
		g.about = fmt.Sprintf("the Pods run agentbox-guest (%s) from %s, which carries %s and %s (of the same build)", images.GuestSmallPath, g.ref, bins.Whole, bins.Small)
	} else {
		g.about = fmt.Sprintf("the Pods run agentbox itself as the guest (%s guest) from %s, which carries %s alone: %s; its Pods start slower", images.GuestPath, g.ref, bins.Whole, bins.Why)
	}
	return g, nil
}

// guestKey is images.GuestKey, remembered per pair of files (path, size,
// mtime): an eval hashes its binaries once, not once per episode.
func guestKey(whole, small string) (string, error) {
	key, err := fileKey(whole)
	if err != nil {
		return "", err
	}
	if small != "" {
		k, err := fileKey(small)
		if err != nil {
			return "", err
		}
		key += "|" + k
	}
	if v, ok := guestIDs.Load(key); ok {
		return v.(string), nil
	}
	id, err := images.GuestKey(whole, small)
	if err == nil {
		guestIDs.Store(key, id)
	}
	return id, err
}

func fileKey(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return path + "|" + strconv.FormatInt(fi.Size(), 10) + "|" + strconv.FormatInt(fi.ModTime().UnixNano(), 10), nil
}

// randomSuffix is 8 hex digits for Pod names.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
