#!/usr/bin/env bash
# deps.sh — what agentbox's make targets need on this machine, installed or
# started where it is missing. `make demo`, `make test` and `make lint` run it
# first (`make deps` runs it for everything); CI runs nothing else to set up.
#
#   scripts/deps.sh [--check] PROFILE
#
# PROFILE is what the make target needs:
#   demo, images  a Docker daemon that answers (docker.io), and as root
#                 debootstrap (the images' offline base where no registry
#                 answers) and crun (registered with a daemon started here)
#   test          that, and the host tools the tests use: Xvfb, Openbox, xev,
#                 xterm, xdotool, xcalc, the core X fonts, keysymdef.h,
#                 dbus-daemon and at-spi2-core (--a11y), zenity, speedcrunch,
#                 bubblewrap, libfaketime (--clock virtual), ffmpeg/ffprobe,
#                 Chromium, python3, git, for Debian's python3
#                 (/usr/bin/python3) pytest, NumPy and pip (the Python
#                 client's tests), and office (the example tasks on the
#                 local backend)
#   lint          staticcheck in $(go env GOPATH)/bin
#   k8s           test, and what scripts/k8s-cluster.sh needs for its
#                 one-node cluster: etcd, containerd and runc, the CNI
#                 plugins, gcc and a static libc (its pause binary), openssl
#   office        the office image's applications on the host, for the
#                 local backend (about 1 GB; test includes it: the example
#                 tasks run on both backends): exactly the packages of
#                 images/Dockerfile.office's apt-get install, read from it —
#                 LibreOffice Calc, Writer and Impress with its GTK3 plugin,
#                 Mousepad, GIMP with GTK2's accessibility modules,
#                 Chromium, and the fonts
#   all           test and lint
#
# As root it installs the missing Debian packages (apt-get), starts dockerd
# when no daemon answers (systemctl where systemd runs, else dockerd in the
# background, logging to /var/log/dockerd.log) and installs staticcheck.
# Not as root it installs nothing that needs root: it says what is missing,
# prints the one command that would install it, and exits 1. --check only
# reports (exit 1 when something is missing). A running daemon is never
# started again or restarted. With everything present it returns in well
# under a second. Exit codes: 0 ready, 1 something is missing or failed,
# 2 usage.
set -euo pipefail

# staticcheck's release that knows the Go of go.mod (Go 1.26).
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2} # release 2026.2.2; the module proxy knows it by its module version
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}

me=$0
say() { printf '%s: %s\n' "$me" "$*" >&2; }
usage() {
	say "usage: $me [--check] demo|images|test|lint|k8s|office|all"
	exit 2
}

check_only=false
profile=
for a in "$@"; do
	case $a in
	--check) check_only=true ;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
		exit 0
		;;
	demo | images | test | lint | k8s | office | all)
		[ -z "$profile" ] || usage
		profile=$a
		;;
	*) usage ;;
	esac
done
[ -n "$profile" ] || usage

want_docker=false want_host=false want_lint=false want_k8s=false want_office=false
case $profile in
office) want_office=true ;;
demo | images) want_docker=true ;;
test) want_docker=true want_host=true want_office=true ;;
k8s) want_docker=true want_host=true want_k8s=true ;;
lint) want_lint=true ;;
all) want_docker=true want_host=true want_office=true want_lint=true ;;
esac

root=false
[ "$(id -u)" = 0 ] && root=true

# ---- what is missing ----

packages=() # Debian packages to install (root)
missing=()  # one line per missing thing, for people
need() {    # need PACKAGE WHAT
	local p
	missing+=("$2 (package $1)")
	for p in "${packages[@]}"; do
		[ "$p" != "$1" ] || return 0
	done
	packages+=("$1")
}
need_tool() { command -v "$1" >/dev/null 2>&1 || need "$2" "$1"; }
need_file() { [ -e "$1" ] || need "$2" "$1"; }
# need_pymod MODULE PACKAGE: a module Debian's python3 must import. Debian's
# python3-* packages install for /usr/bin/python3 alone (a python3 earlier
# in PATH, pyenv's or a virtual environment's, does not see them), and that
# is the interpreter the Python client's tests fall back to.
need_pymod() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import $1" >/dev/null 2>&1 || need "$2" "Python module $1 for /usr/bin/python3"; }
# office_packages DOCKERFILE: every package of the Dockerfile's apt-get
# install that dpkg does not have installed.
office_packages() {
	local f=$1 p list have
	[ -r "$f" ] || {
		say "$f: cannot read it (the office image's package list)"
		exit 1
	}
	# The lines after "apt-get install ... \" up to the line that ends the
	# list (";"), without the backslashes.
	list=$(awk '/apt-get install/ { on = 1; next } on && /^[[:space:]]*;/ { exit } on { gsub(/\\/, ""); print }' "$f")
	[ -n "$list" ] || {
		say "$f: no apt-get install list in it"
		exit 1
	}
	# One dpkg-query for the lot: "PACKAGE STATUS" for those it knows.
	# shellcheck disable=SC2086 # the list is words
	have=$(dpkg-query -W -f='${Package} ${Status}\n' $list 2>/dev/null | awk '/ install ok installed$/ { print $1 }') || true
	for p in $list; do
		grep -qx -- "$p" <<<"$have" || need "$p" "the office image's $p"
	done
}

if $want_docker; then
	need_tool docker docker.io
	need_tool dockerd docker.io
	# The images' offline base is made with debootstrap, which needs root:
	# without root it is of no use, so it is not asked for. Nor is crun,
	# which only a daemon started here gets registered with (crun_runtime).
	if $root; then
		need_tool debootstrap debootstrap
		need_tool crun crun
	fi
fi
if $want_host; then
	need_tool Xvfb xvfb
	need_tool openbox openbox
	need_tool xev x11-utils
	need_tool xterm xterm
	need_tool xdotool xdotool
	need_tool xcalc x11-apps
	need_tool wish tk
	# The accessibility bus (--a11y) on the local backend, which uses the
	# host's programs, and the toolkit apps its tests read: a GTK3 dialog
	# and a small Qt5 app.
	need_tool dbus-daemon dbus-daemon
	need_file /usr/libexec/at-spi-bus-launcher at-spi2-core
	need_tool zenity zenity
	need_tool speedcrunch speedcrunch
	need_tool bwrap bubblewrap
	# The virtual clock (--clock virtual) on the local backend preloads
	# the host's libfaketime into the app (the images carry their own).
	need_file /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 libfaketime
	# The core X fonts older X11 apps ask for, as the Docker image has them.
	need_file /usr/share/fonts/X11/misc/fonts.dir xfonts-base
	# internal/keysym is generated from it, and its test reads it.
	need_file /usr/include/X11/keysymdef.h x11proto-dev
	need_tool ffmpeg ffmpeg
	need_tool ffprobe ffmpeg
	need_tool chromium chromium
	need_tool python3 python3
	need_pymod pytest python3-pytest
	need_pymod numpy python3-numpy
	need_pymod pip python3-pip
	need_tool git git
fi

if $want_office; then
	# The office image's packages, read from images/Dockerfile.office (its
	# one apt-get install: the list is kept there and only there), so the
	# local backend runs the same applications, plugins and fonts as the
	# image. Installed with --no-install-recommends, as the image does.
	office_packages "$(dirname "$0")/../images/Dockerfile.office"
fi

if $want_k8s; then
	need_tool etcd etcd-server
	need_tool containerd containerd
	need_tool runc runc
	need_tool ctr containerd
	need_file /usr/lib/cni/bridge containernetworking-plugins
	need_tool gcc gcc
	need_file /usr/include/stdio.h libc6-dev
	need_tool openssl openssl
	need_tool ip iproute2
	need_tool ss iproute2
	need_tool iptables iptables
	need_tool curl curl
fi

staticcheck_bin=
if $want_lint; then
	if ! command -v go >/dev/null 2>&1; then
		say "go is not on PATH (sudo resets PATH: run '$me lint' as yourself): install Go, see go.mod for the version"
		exit 1
	fi
	staticcheck_bin="$(go env GOPATH)/bin/staticcheck"
	[ -x "$staticcheck_bin" ] || missing+=("staticcheck $STATICCHECK_VERSION ($staticcheck_bin)")
fi

# The Docker daemon: ok (answers), starting (dockerd runs but does not
# answer yet), none, denied (it runs, this user may not use it), remote
# (DOCKER_HOST names a daemon that does not answer), or unknown (no docker
# client to ask). Asked with a deadline: a hung daemon must not hang make.
daemon=ok
daemon_err=
answers() {
	daemon_err=$(timeout 20 docker version --format '{{.Server.Version}}' 2>&1 >/dev/null) && return 0
	daemon_err=${daemon_err:-no answer within 20s}
	return 1
}
dockerd_pid() {
	local p
	p=$(pidof dockerd 2>/dev/null) || return 1
	echo "${p%% *}"
}
daemon_state() {
	if ! command -v docker >/dev/null 2>&1; then
		daemon=unknown # no client to ask it: docker.io is missing
	elif answers; then
		daemon=ok
	elif [ -n "${DOCKER_HOST:-}" ]; then
		daemon=remote
	elif [[ $daemon_err == *"permission denied"* ]]; then
		daemon=denied
	elif dockerd_pid >/dev/null; then
		daemon=starting
	else
		daemon=none
	fi
}
if $want_docker; then
	daemon_state
	case $daemon in
	none) missing+=("a running Docker daemon (dockerd)") ;;
	starting) missing+=("an answer from dockerd (pid $(dockerd_pid)): $daemon_err") ;;
	denied) missing+=("access to the Docker daemon for $(id -un): $daemon_err") ;;
	remote) missing+=("an answer from DOCKER_HOST=$DOCKER_HOST: $daemon_err") ;;
	esac
fi

if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi
if $check_only; then
	say "missing for '$profile':"
	printf '  %s\n' "${missing[@]}" >&2
	exit 1
fi

# ---- what any user may do ----

wait_daemon() { # wait_daemon SECONDS: true once the daemon answers
	local i
	for ((i = 0; i < $1 * 2; i++)); do
		answers && return 0
		sleep 0.5
	done
	answers
}

if [ "$daemon" = remote ]; then
	say "DOCKER_HOST=$DOCKER_HOST does not answer: $daemon_err"
	say "start that daemon, or unset DOCKER_HOST to use this machine's"
	exit 1
fi
if [ "$daemon" = starting ]; then
	# Started by someone else (or by docker.io's installation): never a
	# second one, never a restart. Wait for it.
	pid=$(dockerd_pid) || true
	say "dockerd (pid $pid) runs but does not answer yet; waiting for it"
	wait_daemon 60 || { say "dockerd (pid $pid) does not answer after 60s: $daemon_err"; exit 1; }
	daemon_state
fi
if [ -n "$staticcheck_bin" ] && [ ! -x "$staticcheck_bin" ]; then
	say "installing staticcheck $STATICCHECK_VERSION into $(dirname "$staticcheck_bin")"
	# From outside the module, so go.mod is not touched.
	(cd / && GOFLAGS='' go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION")
fi

# ---- what needs root ----

denied_hint() {
	say "to let user $(id -un) use the Docker daemon (the docker group is as good as root on this machine), then log in again:"
	printf '  sudo usermod -aG docker %s\n' "$(id -un)" >&2
}

if ! $root; then
	if [ "${#packages[@]}" -gt 0 ] || [ "$daemon" = none ]; then
		say "missing for '$profile':"
		printf '  %s\n' "${missing[@]}" >&2
		rp=demo
		if $want_host; then rp='test'; fi
		say "not root, so nothing was installed or started. This installs and starts what is missing:"
		printf '  sudo %s %s\n' "$me" "$rp" >&2
		[ "$daemon" != denied ] || denied_hint
		exit 1
	fi
	if [ "$daemon" = denied ]; then
		say "the Docker daemon runs, but user $(id -un) may not use it: $daemon_err"
		denied_hint
		exit 1
	fi
	exit 0
fi

if [ "${#packages[@]}" -gt 0 ]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		say "no apt-get here: install these with this system's package manager: ${packages[*]}"
		exit 1
	fi
	say "installing ${packages[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || apt-get update
	apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi

# crun_runtime: register crun (a C OCI runtime: a sandbox's create, start
# and delete take 0.1–0.17 s less CPU than with runc, docs/measurements.md)
# with the daemon this script is about to start, as the runtime named crun
# (`--runtime crun`; Docker's default stays runc). Only a daemon started
# here reads it. On a host with cgroup v1 and v2 mounted side by side,
# crun refuses to run while the v2 hierarchy holds controllers; those the
# v1 mounts lack (hugetlb on this machine) are mounted as v1 hierarchies,
# which takes them out of v2, as crun's error asks.
crun_runtime() {
	local f=/etc/docker/daemon.json c
	command -v crun >/dev/null 2>&1 || return 0
	if [ -r /sys/fs/cgroup/unified/cgroup.controllers ]; then
		for c in $(cat /sys/fs/cgroup/unified/cgroup.controllers); do
			[ -d "/sys/fs/cgroup/$c" ] && continue
			mkdir -p "/sys/fs/cgroup/$c" && mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" ||
				say "note: could not mount the $c cgroup hierarchy; --runtime crun may be refused"
		done
	fi
	mkdir -p /etc/docker
	if [ ! -s "$f" ]; then
		printf '{"runtimes": {"crun": {"path": "%s"}}}\n' "$(command -v crun)" >"$f"
	elif ! grep -q '"crun"' "$f"; then
		if [ -x /usr/bin/python3 ]; then
			/usr/bin/python3 - "$f" "$(command -v crun)" <<'PY' || say "note: $f: could not add the crun runtime to it"
import json, sys
path, crun = sys.argv[1], sys.argv[2]
with open(path) as f:
    cfg = json.load(f)
cfg.setdefault("runtimes", {})["crun"] = {"path": crun}
with open(path, "w") as f:
    json.dump(cfg, f, indent=2)
PY
		else
			say "note: $f has no crun runtime and there is no python3 to add it; --runtime crun is unavailable"
		fi
	fi
}

if $want_docker && [ "$daemon" != ok ]; then
	daemon_state
	if [ "$daemon" = starting ]; then
		pid=$(dockerd_pid) || true
		say "dockerd (pid $pid) runs but does not answer yet; waiting for it"
		wait_daemon 60 || { say "dockerd (pid $pid) does not answer after 60s: $daemon_err"; exit 1; }
	elif [ "$daemon" = none ]; then
		crun_runtime
		if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
			say "starting docker (systemctl start docker)"
			systemctl start docker
			wait_daemon 60 || { say "docker.service started but the daemon does not answer: $daemon_err (journalctl -u docker)"; exit 1; }
		else
			say "starting dockerd (log: $DOCKERD_LOG)"
			nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
			wait_daemon 60 || {
				say "dockerd does not answer after 60s: $daemon_err; the end of $DOCKERD_LOG:"
				tail -20 "$DOCKERD_LOG" >&2
				exit 1
			}
		fi
	fi
	say "Docker daemon $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
	if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && ! id -nG "$SUDO_USER" 2>/dev/null | grep -qw docker; then
		say "note: $SUDO_USER is not in the docker group, so make without sudo cannot use the daemon; to allow it (the docker group is as good as root on this machine), then log in again:"
		printf '  sudo usermod -aG docker %s\n' "$SUDO_USER" >&2
	fi
fi
