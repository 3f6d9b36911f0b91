# scripts/deps.sh - sourced by scripts/run, scripts/test and bench/run:
# installs the Debian packages the project needs when they are missing.
# Only as root (CI and the project's machines); otherwise it says what is missing.
TG_PACKAGES="build-essential pkg-config meson ninja-build libevent-dev libyajl-dev libssl-dev
libyaml-dev libsqlite3-dev libcmocka-dev libmimalloc-dev python3-pytest python3-requests curl
openssl nginx-light haproxy"

tg_install_deps() {
	local missing="" p
	for p in $TG_PACKAGES $*; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing Debian packages:$missing (run as root, or apt-get install them)" >&2
		return 1
	fi
	echo "installing:$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null
}
