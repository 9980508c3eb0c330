#!/usr/bin/env bash
# k8s-cluster.sh: a Kubernetes cluster of one or more nodes on this
# machine, built from what is reachable offline, for agentbox's Kubernetes
# backend (tests, CI, developers). It never touches Docker's daemon or its
# containerd: each node has a containerd of its own (own config, root,
# state and socket) and a kubelet of its own (own root, ports, cgroup root,
# CNI bridge and slice of the Pod CIDR).
#
#   scripts/k8s-cluster.sh build     build (or reuse) the Kubernetes binaries
#   scripts/k8s-cluster.sh up [--nodes N]
#                                    build, start etcd, apiserver, controller-
#                                    manager, scheduler, and per node a
#                                    containerd (CRI) and a kubelet; wait for
#                                    the nodes to be Ready; import the pause
#                                    image and agentbox's images into each
#   scripts/k8s-cluster.sh env       print the exports that point tools at it
#   scripts/k8s-cluster.sh load REF… import Docker images into every node
#   scripts/k8s-cluster.sh status    say what runs (exit 0 only when all of it does)
#   scripts/k8s-cluster.sh restart NAME  stop and start a component again
#   scripts/k8s-cluster.sh stop NAME     stop a component (kubelet-2: node 2's kubelet)
#   scripts/k8s-cluster.sh down      stop everything of every node, remove its
#                                    state, fail if anything is left
#
# Nodes: node 1 is $AGENTBOX_K8S_NODE (its components kubelet, containerd);
# node K ≥ 2 is $AGENTBOX_K8S_NODE-K (kubelet-K, containerd-K). With
# several nodes the Pod CIDR is split evenly between them, each node's
# bridge is the gateway of its slice, and the host routes between the
# bridges (an iptables chain of the instance accepts Pod-to-Pod traffic and
# drops the rest from the bridges: Pods reach each other, not the host or
# beyond).
#
# Instances: every AGENTBOX_K8S_* variable below may be set, so that two
# clusters run side by side (state and run directories, ports, CIDRs, node
# name, registry port). Host-wide names (bridges, cgroup roots, the
# iptables chain) carry the instance's API server port; the default
# instance (port 16443) keeps the names of the one-node cluster.
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
# Ports on loopback only; chosen away from the defaults so a developer's
# own cluster is not disturbed.
APISERVER_PORT=${AGENTBOX_K8S_APISERVER_PORT:-16443}
ETCD_PORT=${AGENTBOX_K8S_ETCD_PORT:-12379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
KUBELET_PORT=${AGENTBOX_K8S_KUBELET_PORT:-20250}
POD_CIDR=${AGENTBOX_K8S_POD_CIDR:-10.244.77.0/24}
SERVICE_CIDR=${AGENTBOX_K8S_SERVICE_CIDR:-10.96.77.0/24}
NODE=${AGENTBOX_K8S_NODE:-agentbox-node}
# The instance's tag in host-wide names: none for the default instance.
TAG=${AGENTBOX_K8S_TAG:-}
if [[ -z ${AGENTBOX_K8S_TAG+x} && $APISERVER_PORT != 16443 ]]; then TAG=$APISERVER_PORT; fi
# How many nodes the cluster has: up's --nodes, remembered in $STATE.
NODES=1
if [[ -f $STATE/nodes ]]; then NODES=$(<"$STATE/nodes"); fi
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


# ---- nodes ----

ip2int() { local IFS=. a b c d; read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }
int2ip() { echo "$((($1 >> 24) & 255)).$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"; }

# node K: sets the names of node K (1-based) of a cluster of $NODES nodes:
# N_NAME (the Node), N_SFX (its components' suffix: kubelet$N_SFX), its
# containerd's socket, root and state, its kubelet's root and port, its
# bridge, cgroup root, Pod CIDR and (with several nodes) gateway.
node() {
	local k=$1
	if ((k == 1)); then
		N_NAME=$NODE N_SFX=
	else
		N_NAME=$NODE-$k N_SFX=-$k
	fi
	N_CTR_SOCK=$RUN/containerd$N_SFX/containerd.sock
	N_CTR_ROOT=$STATE/containerd$N_SFX
	N_CTR_STATE=$RUN/containerd$N_SFX/state
	N_KUBELET_DIR=$STATE/kubelet$N_SFX
	N_KUBELET_PORT=$((KUBELET_PORT + 10 * (k - 1)))
	if [[ -z $TAG ]]; then
		N_BRIDGE=abk8s$((k - 1))
	else
		N_BRIDGE=abk8s${TAG}n$k
	fi
	# The kubelet's cgroup root: its Pods go under ROOT/kubepods. The
	# default instance's node 1 keeps /kubepods; the others' are their own.
	if [[ -z $TAG && $k == 1 ]]; then
		N_CGROOT=/
	else
		N_CGROOT=/agentbox-k8s${TAG:+-$TAG}-n$k
	fi
	if ((NODES == 1)); then
		N_CIDR=$POD_CIDR N_GW=
	else
		local base=${POD_CIDR%/*} bits=${POD_CIDR#*/} split=0 size
		while (((1 << split) < NODES)); do split=$((split + 1)); done
		size=$((1 << (32 - bits - split)))
		local start=$((($(ip2int "$base") & ~((1 << (32 - bits)) - 1)) + (k - 1) * size))
		N_CIDR=$(int2ip "$start")/$((bits + split))
		N_GW=$(int2ip $((start + 1)))
	fi
}

# cgroup_dirs ROOT: what a node's kubelet makes under its cgroup root
# ROOT, in each hierarchy (cgroup v2: one; v1: one per hierarchy): /kubepods
# for the root /, else ROOT itself (made by cgroup_root_make).
cgroup_dirs() {
	local r=${1%/} m
	[[ -n $r ]] || r=/kubepods
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		echo "/sys/fs/cgroup$r"
		return
	fi
	for m in /sys/fs/cgroup/*/; do
		[[ -L ${m%/} ]] && continue
		echo "${m%/}$r"
	done
}

# cgroup_root_make ROOT: the cgroup root a kubelet needs to exist (v1: in
# every hierarchy, cpuset with its parent's CPUs and memory nodes).
cgroup_root_make() {
	local r=$1 m
	[[ $r == / ]] && return
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		mkdir -p "/sys/fs/cgroup$r"
		return
	fi
	for m in /sys/fs/cgroup/*/; do
		m=${m%/}
		[[ -L $m ]] && continue
		mkdir -p "$m$r"
		if [[ -f $m/cpuset.cpus ]]; then
			[[ -n $(<"$m$r/cpuset.cpus") ]] || cat "$m/cpuset.cpus" >"$m$r/cpuset.cpus"
			[[ -n $(<"$m$r/cpuset.mems") ]] || cat "$m/cpuset.mems" >"$m$r/cpuset.mems"
		fi
	done
}

# chain: the instance's iptables chain (several nodes only).
CHAIN=AGENTBOX-K8S${TAG:+-$TAG}

# net_up: with several nodes, the host forwards between the nodes'
# bridges: the chain accepts Pod-to-Pod traffic (Docker's FORWARD policy
# is DROP) and drops the rest from the bridges, to the host too.
net_up() {
	((NODES > 1)) || return 0
	command -v iptables >/dev/null || die "iptables is missing (apt-get install iptables)"
	[[ $(sysctl -n net.ipv4.ip_forward) == 1 ]] || die "net.ipv4.ip_forward is 0: Pods on different nodes cannot reach each other (sysctl -w net.ipv4.ip_forward=1)"
	iptables -w -N "$CHAIN" 2>/dev/null || iptables -w -F "$CHAIN"
	iptables -w -A "$CHAIN" -s "$POD_CIDR" -d "$POD_CIDR" -j ACCEPT
	local k
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		iptables -w -A "$CHAIN" -i "$N_BRIDGE" -j DROP
	done
	iptables -w -C FORWARD -j "$CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$CHAIN"
	iptables -w -C INPUT -j "$CHAIN" 2>/dev/null || iptables -w -I INPUT 1 -j "$CHAIN"
}

# net_down: the chain and its jumps go.
net_down() {
	command -v iptables >/dev/null || return 0
	while iptables -w -D FORWARD -j "$CHAIN" 2>/dev/null; do :; done
	while iptables -w -D INPUT -j "$CHAIN" 2>/dev/null; do :; done
	iptables -w -F "$CHAIN" 2>/dev/null || true
	iptables -w -X "$CHAIN" 2>/dev/null || true
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
# fault tests restart the API server under a running Pod, and a node's
# kubelet after stopping it).
restart() {
	local name=$1 args
	[[ -f $RUN/$name.cmd ]] || die "$name was not started by this script"
	mapfile -d '' args <"$RUN/$name.cmd"
	stop "$name"
	start "$name" "${args[@]}"
	case $name in
	kube-apiserver) wait_for 180 "kube-apiserver" kubectl_ get --raw /readyz ;;
	containerd*) wait_for 60 "$name" ctr_ "$(sock_of "$name")" version ;;
	esac
	say "$name restarted"
}
# sock_of containerd[-K]: that node's containerd socket.
sock_of() {
	local k=${1#containerd}
	k=${k#-}
	node "${k:-1}"
	echo "$N_CTR_SOCK"
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
	[[ -n $a ]] || a=$(ip -4 -o addr show scope global 2>/dev/null | awk '$2 != "docker0" && $2 !~ /^abk8s/ { sub(/\/.*/, "", $4); print $4; exit }')
	echo "$a"
}
kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr_() { # ctr_ SOCKET ARGS…: ctr against one node's containerd
	local sock=$1
	shift
	ctr --address "$sock" --namespace k8s.io "$@"
}

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

pause_image() { # pause_image SOCKET
	local sock=$1
	if ctr_ "$sock" images ls -q 2>/dev/null | grep -qx "docker.io/$PAUSE_IMAGE"; then
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
	ctr_ "$sock" images import "$d/pause.tar" >/dev/null
	rm -rf "$d"
	say "pause image $PAUSE_IMAGE built and imported"
}

# import_archive FILE: a docker-save archive into every node's containerd.
import_archive() {
	local k
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		ctr_ "$N_CTR_SOCK" images import "$1" >/dev/null
	done
}

# load REF…: Docker images into the cluster's nodes (docker save, once;
# ctr import into each node).
load() {
	local ref d
	d=$(mktemp -d)
	for ref in "$@"; do
		docker image inspect "$ref" >/dev/null 2>&1 || { rm -rf "$d"; die "Docker has no image $ref"; }
		docker save -o "$d/image.tar" "$ref" && import_archive "$d/image.tar" || { rm -rf "$d"; die "cannot load $ref"; }
		rm -f "$d/image.tar"
		say "loaded $ref"
	done
	rm -rf "$d"
}

up() {
	local nodes=1
	while (($#)); do
		case $1 in
		--nodes) nodes=${2:-}; shift 2 || die "--nodes needs a number" ;;
		--nodes=*) nodes=${1#--nodes=}; shift ;;
		*) die "up: unknown argument $1 (up [--nodes N])" ;;
		esac
	done
	[[ $nodes =~ ^[1-9][0-9]?$ ]] || die "--nodes $nodes: want a number of nodes from 1 to 99"
	[[ $(id -u) == 0 ]] || die "run as root (it starts containerd and a kubelet)"
	local need
	for need in etcd containerd runc ctr openssl gcc ip ss iptables; do
		command -v "$need" >/dev/null || die "$need is missing (scripts/deps.sh k8s installs what this needs)"
	done
	[[ -x /usr/lib/cni/bridge ]] || die "CNI plugins are missing (apt-get install containernetworking-plugins)"
	build
	build_registry
	if [[ -d $STATE ]] && ! running kube-apiserver && ! running kubelet; then
		say "a previous cluster's state is in $STATE and nothing runs: removing it first"
		down
	fi
	if running kube-apiserver && ((nodes != NODES)); then
		die "a cluster of $NODES node(s) runs from $STATE: take it down first to have $nodes"
	fi
	NODES=$nodes
	local bits=${POD_CIDR#*/} split=0
	while (((1 << split) < NODES)); do split=$((split + 1)); done
	((bits + split <= 28)) || die "the Pod CIDR $POD_CIDR is too small for $NODES nodes"
	running kube-apiserver || check_free
	# An up that fails half-way takes down what it started.
	trap 'say "up failed: taking down what it started"; down' EXIT
	local t0=$SECONDS ip
	ip=$(node_ip)
	[[ -n $ip ]] || die "no IPv4 address with a route: the node needs one"
	mkdir -p "$STATE" "$RUN" "$LOGS"
	echo "$NODES" >"$STATE/nodes"
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
	# With several nodes, a node whose kubelet stops is NotReady (and
	# tainted, so nothing new goes there) after 30 s rather than 50 s.
	local cm_nodes=()
	((NODES == 1)) || cm_nodes=(--node-monitor-grace-period 30s --node-monitor-period 2s)
	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG_ADMIN" \
		--authentication-kubeconfig "$KUBECONFIG_ADMIN" --authorization-kubeconfig "$KUBECONFIG_ADMIN" \
		--bind-address 127.0.0.1 --secure-port $((APISERVER_PORT + 1)) --leader-elect=false \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
		--use-service-account-credentials=false --allocate-node-cidrs=false --controllers '*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle' --profiling=false \
		"${cm_nodes[@]}"
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_ADMIN" \
		--authentication-kubeconfig "$KUBECONFIG_ADMIN" --authorization-kubeconfig "$KUBECONFIG_ADMIN" \
		--bind-address 127.0.0.1 --secure-port $((APISERVER_PORT + 2)) --leader-elect=false --profiling=false

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
	local k
	for ((k = 1; k <= NODES; k++)); do
		node_up "$k" "$ip"
	done
	net_up
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		wait_for 180 "kubelet$N_SFX" bash -c "'$BIN/kubectl' --kubeconfig '$KUBECONFIG_ADMIN' get node '$N_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
	done
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
	local names=$NODE
	for ((k = 2; k <= NODES; k++)); do names+=", $NODE-$k"; done
	say "cluster up in $((SECONDS - t0))s: node(s) $names Ready; eval \"\$($0 env)\" points kubectl and agentbox at it"
}

# node_up K IP: node K's containerd and kubelet.
node_up() {
	local k=$1 ip=$2 pki=$STATE/pki
	node "$k"
	local conf=$STATE/node$N_SFX
	mkdir -p "$conf/cni/net.d" "$RUN/containerd$N_SFX"
	# The node's own containerd, beside Docker's: its own config, root,
	# state, socket, runc state; the CRI plugin on; CNI from Debian's
	# plugins. One node: Pods get an address on a bridge without a gateway:
	# they reach each other and nothing else. Several: the bridge is the
	# gateway of the node's slice, with a route to the whole Pod CIDR only
	# (net_up's chain lets Pod-to-Pod traffic through and nothing else).
	cat >"$conf/containerd.toml" <<TOML
version = 2
root = "$N_CTR_ROOT"
state = "$N_CTR_STATE"
[grpc]
  address = "$N_CTR_SOCK"
[ttrpc]
  address = "$N_CTR_SOCK.ttrpc"
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
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's state of this node's containers, not /run/containerd/runc.
        Root = "$RUN/containerd$N_SFX/runc"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."$REGISTRY"]
    endpoint = ["http://$REGISTRY"]
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$conf/cni/net.d"
TOML
	local gw=false routes=
	if [[ -n $N_GW ]]; then
		gw=true
		routes=', "routes": [{"dst": "'$POD_CIDR'"}]'
	fi
	cat >"$conf/cni/net.d/10-agentbox.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "agentbox-k8s${TAG:+-$TAG}$N_SFX",
  "plugins": [{
    "type": "bridge", "bridge": "$N_BRIDGE", "isGateway": $gw, "isDefaultGateway": false, "ipMasq": false, "hairpinMode": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$N_CIDR"${N_GW:+, \"gateway\": \"$N_GW\"}}]]$routes, "dataDir": "$conf/cni/ipam"}
  }]
}
JSON
	start "containerd$N_SFX" containerd --config "$conf/containerd.toml"
	wait_for 60 "containerd$N_SFX" ctr_ "$N_CTR_SOCK" version
	pause_image "$N_CTR_SOCK"
	cgroup_root_make "$N_CGROOT"

	cat >"$conf/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$ip"
port: $N_KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((N_KUBELET_PORT - 2))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: "$N_CGROOT"
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: "unix://$N_CTR_SOCK"
podLogsDir: "$conf/pod-logs"
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
	start "kubelet$N_SFX" "$BIN/kubelet" --config "$conf/kubelet.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--root-dir "$N_KUBELET_DIR" --hostname-override "$N_NAME" --node-ip "$ip" --cert-dir "$N_KUBELET_DIR/pki"
}

# check_free: nothing of another cluster uses this instance's host-wide
# names or ports (two instances need different AGENTBOX_K8S_* values).
check_free() {
	local k port busy=()
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		if ip link show "$N_BRIDGE" >/dev/null 2>&1; then busy+=("bridge $N_BRIDGE"); fi
		if [[ $N_CGROOT != / ]] && [[ -n $(cgroup_dirs "$N_CGROOT" | while read -r d; do [[ -d $d ]] && echo y; done) ]]; then busy+=("cgroup $N_CGROOT"); fi
		for port in "$N_KUBELET_PORT" $((N_KUBELET_PORT - 2)); do
			if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then busy+=("port $port"); fi
		done
	done
	for port in "$APISERVER_PORT" $((APISERVER_PORT + 1)) $((APISERVER_PORT + 2)) "$ETCD_PORT" "$ETCD_PEER_PORT" "${REGISTRY##*:}"; do
		if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then busy+=("port $port"); fi
	done
	if iptables -w -S "$CHAIN" >/dev/null 2>&1; then busy+=("iptables chain $CHAIN"); fi
	((${#busy[@]} == 0)) && return 0
	die "in use by something else (another cluster? set other AGENTBOX_K8S_* values): ${busy[*]}"
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

# status says what runs, on every node; it exits 0 only when every
# component runs (3 when none does, 1 when some do), as `systemctl status`
# does.
status() {
	local n up=0 all=0 k names=(etcd kube-apiserver kube-controller-manager kube-scheduler registry)
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		names+=("containerd$N_SFX" "kubelet$N_SFX")
	done
	for n in "${names[@]}"; do
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

# shims SOCKET: the PIDs of the containerd shims of the containerd at
# SOCKET (their command line names it).
shims() {
	local p
	for p in /proc/[0-9]*; do
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "containerd-shim.* -address $1 "; then
			echo "${p#/proc/}"
		fi
	done
}

down() {
	local k c m i procs
	# Pods first, so their containers and network go with containerd's help.
	if running kube-apiserver && running kubelet; then
		kubectl_ delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
	fi
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		stop "kubelet$N_SFX"
		if running "containerd$N_SFX"; then
			for c in $(ctr_ "$N_CTR_SOCK" containers ls -q 2>/dev/null); do
				ctr_ "$N_CTR_SOCK" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
			done
			sleep 1
			for c in $(ctr_ "$N_CTR_SOCK" containers ls -q 2>/dev/null); do
				ctr_ "$N_CTR_SOCK" tasks delete -f "$c" >/dev/null 2>&1 || true
				ctr_ "$N_CTR_SOCK" containers delete "$c" >/dev/null 2>&1 || true
			done
		fi
	done
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop etcd
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		stop "containerd$N_SFX"
	done
	stop registry
	# What the kubelets and containerds left: pod mounts, network
	# namespaces, the bridges, the shims of these containerds only.
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v s="$STATE/" -v r="$RUN/" 'index($2, s) == 1 || index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
	for ((k = 1; k <= NODES; k++)); do
		node "$k"
		# shellcheck disable=SC2046 # one PID a word
		kill -9 $(shims "$N_CTR_SOCK") 2>/dev/null || true
		ip link del "$N_BRIDGE" 2>/dev/null || true
		# The kubelet's cgroups (cgroupfs driver: ROOT/kubepods, v1 or
		# v2) hold the node's Pods' processes only: any that outlived
		# their shim go now, then the cgroups themselves (with the root,
		# when it is the node's own). Docker's containers are under
		# /docker, another node's under its own root: untouched.
		while read -r m; do
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
		done < <(cgroup_dirs "$N_CGROOT")
	done
	net_down
	local nodes=$NODES
	if [[ ${1:-} != --keep-state ]]; then
		rm -rf "$STATE" "$RUN"
	fi
	leftovers "$nodes" || return 1
	say "cluster down"
}

# leftovers NODES: say what a down left on the machine (mounts, our
# containerds' shims, the bridges, the kubelets' cgroups, the iptables
# chain) and fail if anything.
leftovers() {
	local left=() m k
	while read -r m; do
		left+=("mount $m")
	done < <(awk -v s="$STATE/" -v r="$RUN/" 'index($2, s) == 1 || index($2, r) == 1 { print $2 }' /proc/mounts)
	for ((k = 1; k <= $1; k++)); do
		node "$k"
		for m in $(shims "$N_CTR_SOCK"); do left+=("shim pid $m"); done
		if ip link show "$N_BRIDGE" >/dev/null 2>&1; then left+=("bridge $N_BRIDGE"); fi
		while read -r m; do
			if [[ -d $m ]]; then left+=("cgroup $m"); fi
		done < <(cgroup_dirs "$N_CGROOT")
	done
	if command -v iptables >/dev/null && iptables -w -S "$CHAIN" >/dev/null 2>&1; then left+=("iptables chain $CHAIN"); fi
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
up)
	shift
	up "$@"
	;;
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
stop)
	[[ -f $RUN/${2:?stop NAME}.cmd ]] || die "$2 was not started by this script"
	stop "$2"
	say "$2 stopped"
	;;
import)
	shift
	for f in "$@"; do import_archive "$f"; done
	;;
*) die "usage: $0 build|up [--nodes N]|down|env|status|restart NAME|stop NAME|load REF…|import FILE…" ;;
esac
