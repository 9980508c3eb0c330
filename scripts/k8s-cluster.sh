#!/usr/bin/env bash
# k8s-cluster.sh: a one-node Kubernetes cluster on this machine, built from
# what is reachable offline, for agentbox's Kubernetes backend (tests, CI,
# developers). It never touches Docker's daemon or its containerd: the
# cluster has a containerd of its own (own config, root, state and socket).
#
#   scripts/k8s-cluster.sh build     build (or reuse) the Kubernetes binaries
#   scripts/k8s-cluster.sh up        build, start etcd, apiserver, controller-
#                                    manager, scheduler, containerd (CRI) and
#                                    kubelet; wait for the node to be Ready;
#                                    import the pause image and agentbox's images
#   scripts/k8s-cluster.sh env       print the exports that point tools at it
#   scripts/k8s-cluster.sh load REF… import Docker images into the cluster
#   scripts/k8s-cluster.sh status    say what runs (exit 0 only when all of it does)
#   scripts/k8s-cluster.sh restart NAME  stop and start a component again
#   scripts/k8s-cluster.sh down      stop everything and remove its state
#
# Binaries are cached outside the repository, keyed by version:
# $AGENTBOX_K8S_CACHE (default /var/cache/agentbox-k8s)/v$K8S_VERSION/bin.
# Kubernetes builds from the Go module proxy through a wrapper module whose
# replace lines point each k8s.io staging module at its published version.
# Needs root, Go, and Debian's etcd-server, containerd, runc and
# containernetworking-plugins (scripts/deps.sh installs them).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.34.4}
STAGING_VERSION=0.${K8S_VERSION#1.}
CACHE=${AGENTBOX_K8S_CACHE:-/var/cache/agentbox-k8s}/v$K8S_VERSION
BIN=$CACHE/bin
STATE=${AGENTBOX_K8S_STATE:-/var/lib/agentbox-k8s}
RUN=${AGENTBOX_K8S_RUN:-/run/agentbox-k8s}
LOGS=$STATE/logs
KUBECONFIG_ADMIN=$STATE/admin.kubeconfig
CTR_SOCK=$RUN/containerd/containerd.sock
# Ports on loopback only; chosen away from the defaults so a developer's
# own cluster is not disturbed.
APISERVER_PORT=${AGENTBOX_K8S_APISERVER_PORT:-16443}
ETCD_PORT=${AGENTBOX_K8S_ETCD_PORT:-12379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
KUBELET_PORT=${AGENTBOX_K8S_KUBELET_PORT:-20250}
POD_CIDR=${AGENTBOX_K8S_POD_CIDR:-10.244.77.0/24}
SERVICE_CIDR=${AGENTBOX_K8S_SERVICE_CIDR:-10.96.77.0/24}
NODE=${AGENTBOX_K8S_NODE:-agentbox-node}
PAUSE_IMAGE=agentbox/pause:$K8S_VERSION
# A registry on loopback (CNCF distribution, built from the module proxy):
# the nodes pull from it over HTTP, so `agentbox image build --guest --push`
# is tested as a user with a registry would use it.
REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
REGISTRY_BIN=${AGENTBOX_K8S_CACHE:-/var/cache/agentbox-k8s}/registry/$REGISTRY_VERSION/registry
REGISTRY=127.0.0.1:${AGENTBOX_K8S_REGISTRY_PORT:-15000}
# Images imported on up (those Docker has; missing ones are skipped).
IMAGES=${AGENTBOX_K8S_IMAGES:-agentbox/runtime:bookworm agentbox/test:bookworm}
COMPONENTS=(kube-apiserver kubelet kube-scheduler kube-controller-manager kubectl)

say() { printf 'k8s-cluster: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

build() {
	local missing=()
	for c in "${COMPONENTS[@]}"; do
		[[ -x $BIN/$c ]] || missing+=("$c")
	done
	if ((${#missing[@]} == 0)); then
		say "binaries v$K8S_VERSION cached in $BIN"
		return
	fi
	command -v go >/dev/null || die "go is needed to build Kubernetes"
	local src=$CACHE/src
	mkdir -p "$src" "$BIN"
	say "building ${missing[*]} v$K8S_VERSION into $BIN (CGO_ENABLED=0; ~11 min on 2 busy cores, less with a warm build cache)"
	# The wrapper module: k8s.io/kubernetes names its staging modules with
	# replace lines to ./staging, which a module dependency cannot use;
	# point each at its published version instead.
	(
		cd "$src"
		local mod
		mod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
		[[ -f $mod ]] || die "cannot download k8s.io/kubernetes v$K8S_VERSION from the module proxy"
		{
			echo "module agentbox.local/k8s-build"
			echo
			echo "go 1.24.0"
			echo
			echo "require k8s.io/kubernetes v$K8S_VERSION"
			echo
			echo "replace ("
			sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 v'"$STAGING_VERSION"'#p' "$mod"
			echo ")"
		} >go.mod
		{
			echo "//go:build tools"
			echo
			echo "package tools"
			echo
			echo "import ("
			for c in "${COMPONENTS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
			echo ")"
		} >tools.go
		GOFLAGS=-mod=mod go mod tidy >/dev/null
		local v=k8s.io/component-base/version minor=${K8S_VERSION#1.}
		minor=${minor%%.*}
		local ldflags now
		now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
		ldflags="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=$now"
		local pkgs=()
		for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
		CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$BIN/" "${pkgs[@]}"
	)
	say "built: $(cd "$BIN" && echo *)"
}

build_registry() {
	[[ -x $REGISTRY_BIN ]] && return
	say "building the registry (distribution $REGISTRY_VERSION) into $(dirname "$REGISTRY_BIN")"
	(cd / && GOBIN=$(dirname "$REGISTRY_BIN") CGO_ENABLED=0 GOFLAGS='' nice -n 10 go install "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION")
}


# ---- state ----

pidfile() { echo "$RUN/$1.pid"; }
# starttime PID: the process's start time (field 22 of /proc/PID/stat), so
# a PID the kernel gave to another process since is not taken for ours
# (a cluster whose script was killed leaves its PID files behind).
starttime() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086 # split into fields on purpose
	set -- $stat
	echo "${20}"
}
pidof_() { # pidof_ NAME: the PID of the component we started, if it lives
	local p st
	{ read -r p st <"$(pidfile "$1")"; } 2>/dev/null || return 1
	[[ -n $p && -n $st && $(starttime "$p") == "$st" ]] || return 1
	echo "$p"
}
running() { pidof_ "$1" >/dev/null; } # running NAME: its process lives
start() { # start NAME CMD…: in the background, logging to $LOGS/NAME.log
	local name=$1
	shift
	if running "$name"; then
		return
	fi
	printf '%s\0' "$@" >"$RUN/$name.cmd" # for restart
	nohup setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	local p=$!
	echo "$p $(starttime "$p")" >"$(pidfile "$name")"
}

# restart NAME: stop a component and start it again as it was started (the
# fault tests restart the API server under a running Pod).
restart() {
	local name=$1 args
	[[ -f $RUN/$name.cmd ]] || die "$name was not started by this script"
	mapfile -d '' args <"$RUN/$name.cmd"
	stop "$name"
	start "$name" "${args[@]}"
	case $name in
	kube-apiserver) wait_for 180 "kube-apiserver" kubectl_ get --raw /readyz ;;
	containerd) wait_for 60 "containerd" ctr_ version ;;
	esac
	say "$name restarted"
}
stop() { # stop NAME: TERM, then KILL after 10 s; only the process we started
	local p i
	if p=$(pidof_ "$1"); then
		kill "$p" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null || true
	fi
	rm -f "$(pidfile "$1")"
}
wait_for() { # wait_for SECONDS WHAT CMD…; WHAT a component we started: stop at once if it exits
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 4; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		if [[ -f $(pidfile "$what") ]] && ! running "$what"; then
			say "the end of $LOGS/$what.log:"
			tail -n 5 "$LOGS/$what.log" >&2 2>/dev/null || true
			die "$what exited instead of coming up (log: $LOGS/$what.log)"
		fi
		sleep 0.25
	done
	die "$what did not come up within ${secs}s (logs: $LOGS)"
}
node_ip() { # the address of the default route; offline without one, the first global address off Docker's and our bridges
	local a
	a=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)
	[[ -n $a ]] || a=$(ip -4 -o addr show scope global 2>/dev/null | awk '$2 != "docker0" && $2 != "abk8s0" { sub(/\/.*/, "", $4); print $4; exit }')
	echo "$a"
}
kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr_() { ctr --address "$CTR_SOCK" --namespace k8s.io "$@"; }

# ---- certificates: one CA; the API server's serving certificate; one
# client certificate (system:masters) for kubectl, the controllers, the
# kubelet and the API server's calls to the kubelet; the service-account
# key. EC P-256: quick to make. ----

certs() {
	local pki=$STATE/pki ip=$1
	[[ -f $pki/admin.crt ]] && return
	mkdir -p "$pki"
	(
		cd "$pki"
		key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
		key ca.key
		openssl req -x509 -new -key ca.key -subj /CN=agentbox-k8s-ca -days 3650 -out ca.crt 2>/dev/null
		key apiserver.key
		openssl req -new -key apiserver.key -subj /CN=kube-apiserver -out apiserver.csr 2>/dev/null
		printf 'subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:%s,IP:%s\nextendedKeyUsage=serverAuth\n' \
			"$ip" "${SERVICE_CIDR%.*}.1" >apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile apiserver.ext -out apiserver.crt 2>/dev/null
		key admin.key
		openssl req -new -key admin.key -subj /O=system:masters/CN=agentbox-admin -out admin.csr 2>/dev/null
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext -out admin.crt 2>/dev/null
		key sa.key
		openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
		chmod 600 ./*.key
	)
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_ADMIN" set-cluster agentbox --server "https://127.0.0.1:$APISERVER_PORT" \
		--certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_ADMIN" set-credentials admin --client-certificate "$pki/admin.crt" \
		--client-key "$pki/admin.key" --embed-certs >/dev/null
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_ADMIN" set-context agentbox --cluster agentbox --user admin --namespace default >/dev/null
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_ADMIN" use-context agentbox >/dev/null
	chmod 600 "$KUBECONFIG_ADMIN"
}

# ---- the pause image: a static pause process, imported as a docker
# archive (no registry, no Docker needed) ----

pause_image() {
	if ctr_ images ls -q 2>/dev/null | grep -qx "docker.io/$PAUSE_IMAGE"; then
		return
	fi
	local d
	d=$(mktemp -d)
	cat >"$d/pause.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
/* The pod sandbox's process: holds its namespaces, reaps, ends on TERM/INT. */
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
	signal(SIGINT, quit);
	signal(SIGTERM, quit);
	signal(SIGCHLD, reap);
	for (;;) pause();
}
C
	gcc -static -Os -o "$d/pause" "$d/pause.c" || die "cannot build the pause binary (gcc and libc6-dev are needed)"
	strip "$d/pause" 2>/dev/null || true
	mkdir -p "$d/img/rootfs"
	cp "$d/pause" "$d/img/rootfs/pause"
	tar -C "$d/img/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$d/img/layer.tar" pause
	local diff cfg
	diff=$(sha256sum "$d/img/layer.tar" | cut -d' ' -f1)
	mkdir -p "$d/img/$diff"
	mv "$d/img/layer.tar" "$d/img/$diff/layer.tar"
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$diff" >"$d/img/config.json"
	cfg=$(sha256sum "$d/img/config.json" | cut -d' ' -f1)
	mv "$d/img/config.json" "$d/img/$cfg.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$PAUSE_IMAGE" "$diff" >"$d/img/manifest.json"
	tar -C "$d/img" -cf "$d/pause.tar" manifest.json "$cfg.json" "$diff"
	ctr_ images import "$d/pause.tar" >/dev/null
	rm -rf "$d"
	say "pause image $PAUSE_IMAGE built and imported"
}

# import_archive FILE: a docker-save archive into the cluster's containerd.
import_archive() {
	ctr_ images import "$1" >/dev/null
}

# load REF…: Docker images into the cluster (docker save | ctr import).
load() {
	local ref
	for ref in "$@"; do
		docker image inspect "$ref" >/dev/null 2>&1 || die "Docker has no image $ref"
		docker save "$ref" | ctr_ images import - >/dev/null
		say "loaded $ref"
	done
}

up() {
	[[ $(id -u) == 0 ]] || die "run as root (it starts containerd and a kubelet)"
	local need
	for need in etcd containerd runc ctr openssl gcc ip; do
		command -v "$need" >/dev/null || die "$need is missing (scripts/deps.sh k8s installs what this needs)"
	done
	[[ -x /usr/lib/cni/bridge ]] || die "CNI plugins are missing (apt-get install containernetworking-plugins)"
	build
	build_registry
	if [[ -d $STATE ]] && ! running kube-apiserver && ! running kubelet; then
		say "a previous cluster's state is in $STATE and nothing runs: removing it first"
		down
	fi
	# An up that fails half-way takes down what it started.
	trap 'say "up failed: taking down what it started"; down' EXIT
	local t0=$SECONDS ip
	ip=$(node_ip)
	[[ -n $ip ]] || die "no IPv4 address with a route: the node needs one"
	mkdir -p "$STATE" "$RUN" "$LOGS" "$STATE/cni/net.d" "$RUN/containerd"
	certs "$ip"

	start etcd etcd --name agentbox-k8s --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "agentbox-k8s=http://127.0.0.1:$ETCD_PEER_PORT"
	local pki=$STATE/pki
	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" --advertise-address "$ip" \
		--endpoint-reconciler-type none \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
		--kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
		--kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.pub" \
		--service-account-signing-key-file "$pki/sa.key" --service-cluster-ip-range "$SERVICE_CIDR" \
		--authorization-mode Node,RBAC --allow-privileged=false --profiling=false
	wait_for 120 "etcd" curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
	wait_for 180 "kube-apiserver" kubectl_ get --raw /readyz
	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG_ADMIN" \
		--authentication-kubeconfig "$KUBECONFIG_ADMIN" --authorization-kubeconfig "$KUBECONFIG_ADMIN" \
		--bind-address 127.0.0.1 --secure-port $((APISERVER_PORT + 1)) --leader-elect=false \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
		--use-service-account-credentials=false --allocate-node-cidrs=false --controllers '*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle' --profiling=false
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_ADMIN" \
		--authentication-kubeconfig "$KUBECONFIG_ADMIN" --authorization-kubeconfig "$KUBECONFIG_ADMIN" \
		--bind-address 127.0.0.1 --secure-port $((APISERVER_PORT + 2)) --leader-elect=false --profiling=false

	# The cluster's own containerd, beside Docker's: its own config, root,
	# state, socket; the CRI plugin on; CNI from Debian's plugins. Pods get
	# an address on a bridge without a gateway: they reach each other and
	# nothing else (no route to the host or beyond).
	cat >"$STATE/containerd.toml" <<TOML
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd/state"
[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = "$CTR_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  max_container_log_line_size = 16384
  # The kubelet asks for negative OOM scores (-998 for a Pod's sandbox),
  # which need CAP_SYS_RESOURCE; where agentbox runs it may not have it
  # (a VM's sandboxed root): no score below containerd's own.
  restrict_oom_score_adj = true
  # Pods' network namespaces under $RUN (not /run/netns), so down finds
  # and unmounts them with the rest.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."$REGISTRY"]
    endpoint = ["http://$REGISTRY"]
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
TOML
	cat >"$STATE/cni/net.d/10-agentbox.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "agentbox-k8s",
  "plugins": [{
    "type": "bridge", "bridge": "abk8s0", "isGateway": false, "ipMasq": false, "hairpinMode": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "dataDir": "$STATE/cni/ipam"}
  }]
}
JSON
	cat >"$STATE/registry.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: "$STATE/registry"}
  delete: {enabled: true}
http:
  addr: "$REGISTRY"
YAML
	start registry "$REGISTRY_BIN" serve "$STATE/registry.yml"
	start containerd containerd --config "$STATE/containerd.toml"
	wait_for 60 "containerd" ctr_ version
	pause_image

	cat >"$STATE/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$ip"
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_PORT - 2))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: "unix://$CTR_SOCK"
podPidsLimit: 256
maxPods: 60
serializeImagePulls: false
containerLogMaxSize: 10Mi
containerLogMaxFiles: 2
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 95
imageGCLowThresholdPercent: 90
resolvConf: /etc/resolv.conf
# No iptables chains on the host (KUBE-FIREWALL in INPUT and OUTPUT,
# canaries, a hint): they are for kube-proxy, which this cluster does not
# run, and would stay behind after down.
makeIPTablesUtilChains: false
YAML
	start kubelet "$BIN/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--root-dir "$STATE/kubelet" --hostname-override "$NODE" --node-ip "$ip" --cert-dir "$STATE/kubelet/pki"
	wait_for 180 "node $NODE (Ready)" bash -c "'$BIN/kubectl' --kubeconfig '$KUBECONFIG_ADMIN' get node '$NODE' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
	wait_for 120 "the default service account" kubectl_ -n default get serviceaccount default
	local ref
	for ref in $IMAGES; do
		if docker image inspect "$ref" >/dev/null 2>&1; then
			load "$ref"
		else
			say "Docker has no $ref: not loaded"
		fi
	done
	trap - EXIT
	say "cluster up in $((SECONDS - t0))s: node $NODE Ready; eval \"\$($0 env)\" points kubectl and agentbox at it"
}

envs() {
	local self
	self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
	printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_ADMIN"
	printf 'export AGENTBOX_K8S_IMPORT=%q\n' "$self import"
	printf 'export AGENTBOX_K8S_CLUSTER=%q\n' "$self"
	printf 'export AGENTBOX_K8S_REGISTRY=%q\n' "$REGISTRY"
	# shellcheck disable=SC2016 # $PATH is for the shell that evals this
	printf 'export PATH=%q:"$PATH"\n' "$BIN"
}

# status says what runs; it exits 0 only when every component runs (3 when
# none does, 1 when some do), as `systemctl status` does.
status() {
	local n up=0 all=0
	for n in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet registry; do
		all=$((all + 1))
		if running "$n"; then
			up=$((up + 1))
			echo "$n: running (pid $(pidof_ "$n"))"
		else
			echo "$n: stopped"
		fi
	done
	if ((up > 0)) && [[ -f $KUBECONFIG_ADMIN ]]; then kubectl_ get nodes 2>/dev/null || true; fi
	if ((up == 0)); then
		say "the cluster is down (scripts/k8s-cluster.sh up starts it)"
		return 3
	elif ((up < all)); then
		say "$((all - up)) of $all components are stopped"
		return 1
	fi
}

down() {
	# Pods first, so their containers and network go with containerd's help.
	if running kube-apiserver && running kubelet; then
		kubectl_ delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
	fi
	stop kubelet
	if running containerd; then
		local c
		for c in $(ctr_ containers ls -q 2>/dev/null); do
			ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
		done
		sleep 1
		for c in $(ctr_ containers ls -q 2>/dev/null); do
			ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true
			ctr_ containers delete "$c" >/dev/null 2>&1 || true
		done
	fi
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop etcd
	stop containerd
	stop registry
	# What the kubelet and containerd left: pod mounts, network namespaces,
	# the bridge, the shims of this containerd only.
	local m i
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v s="$STATE/" -v r="$RUN/" 'index($2, s) == 1 || index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
	# Shims of this containerd (their command line names its socket), by PID.
	local p
	for p in /proc/[0-9]*; do
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "containerd-shim.* -address $CTR_SOCK "; then
			kill -9 "${p#/proc/}" 2>/dev/null || true
		fi
	done
	ip link del abk8s0 2>/dev/null || true
	# The kubelet's cgroups (cgroupfs driver: /kubepods, v1 or v2) hold the
	# Pods' processes only: any that outlived their shim go now, then the
	# cgroups themselves. Docker's containers are under /docker, untouched.
	local procs
	for m in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
		[[ -d $m ]] || continue
		for ((i = 0; i < 20; i++)); do
			procs=$(find "$m" -name cgroup.procs -exec cat {} + 2>/dev/null)
			[[ -n $procs ]] || break
			# shellcheck disable=SC2086 # one PID a word
			kill -9 $procs 2>/dev/null || true
			sleep 0.25
		done
		for ((i = 0; i < 20; i++)); do
			find "$m" -depth -type d -exec rmdir {} \; 2>/dev/null || true
			[[ -d $m ]] || break
			sleep 0.25
		done
	done
	if [[ ${1:-} != --keep-state ]]; then
		rm -rf "$STATE" "$RUN"
	fi
	leftovers || return 1
	say "cluster down"
}

# leftovers: say what a down left on the machine (mounts, our containerd's
# shims, the bridge, the kubelet's cgroups) and fail if anything.
leftovers() {
	local left=() p m
	while read -r m; do
		left+=("mount $m")
	done < <(awk -v s="$STATE/" -v r="$RUN/" 'index($2, s) == 1 || index($2, r) == 1 { print $2 }' /proc/mounts)
	for p in /proc/[0-9]*; do
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "containerd-shim.* -address $CTR_SOCK "; then
			left+=("shim pid ${p#/proc/}")
		fi
	done
	if ip link show abk8s0 >/dev/null 2>&1; then left+=("bridge abk8s0"); fi
	for m in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
		if [[ -d $m ]]; then left+=("cgroup $m"); fi
	done
	# return 0, not a bare return: in up's EXIT trap a bare one would
	# return the status of die's exit.
	((${#left[@]} == 0)) && return 0
	say "error: down left behind: ${left[*]}"
	return 1
}

case ${1:-} in
build)
	build
	build_registry
	;;
up) up ;;
down) down "${2:-}" ;;
env) envs ;;
status) status ;;
load)
	shift
	load "$@"
	;;
restart)
	restart "${2:?restart NAME}"
	;;
import)
	shift
	for f in "$@"; do import_archive "$f"; done
	;;
*) die "usage: $0 build|up|down|env|status|restart NAME|load REF…|import FILE…" ;;
esac
