# scripts/deps.sh - sourced by scripts/run, scripts/test and bench/run:
# installs the Debian packages the project needs when they are missing.
# Only as root (CI and the project's machines); otherwise it says what is missing.
# TG_PACKAGES is what building and the quick start need (scripts/run: the
# gateway with its embedded emulator on SQLite); TG_TEST_PACKAGES is what the
# tests add (scripts/test, bench/run): the libraries of the optional
# features, the peers the tests run (nginx, HAProxy, PostgreSQL, Node.js for
# the npm tools), promtool, and what the package and image tests build with
# (debhelper, dpkg-dev, lintian, fakeroot: test_package.py; mmdebstrap:
# test_container.py), and chromium, the browser the console's test drives
# (test_console.py).
# prometheus is there for promtool (`promtool check metrics` in the tests); its
# server, enabled by the package, is stopped and disabled at once: it listens
# on :9090, the admin listener's default port. pgbouncer is the pooler a fleet
# is tested behind (test_fleet_pooler.py starts its own on a free port); its
# service is stopped and disabled the same way.
# tg_install_npm (scripts/test) installs the npm packages the integration
# tests use into $TG_NPM_DIR (default build-npm/ in the repository).
TG_PACKAGES="build-essential pkg-config meson ninja-build libevent-dev libyajl-dev libssl-dev
libyaml-dev libsqlite3-dev libmimalloc-dev scdoc curl"
TG_TEST_PACKAGES="libcmocka-dev python3-pytest python3-requests openssl nginx-light haproxy
nodejs postgresql-15 postgresql-common libpq-dev libsystemd-dev systemd man-db prometheus
debhelper dpkg-dev lintian fakeroot mmdebstrap pgbouncer chromium"

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
	apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null || return 1
	case " $missing " in
	*" prometheus "*) systemctl disable --now prometheus.service >/dev/null 2>&1 || true ;;
	esac
	case " $missing " in
	*" pgbouncer "*) systemctl disable --now pgbouncer.service >/dev/null 2>&1 || true ;;
	esac
}

# Test-only npm packages: oauth2-mock-server (a real OAuth2 authorization
# server for the vendor token tests, tests/integration/oauth2_mock.mjs);
# @stoplight/spectral-cli (lints docs/openapi/*.yaml) and @stoplight/prism-cli (a proxy
# that validates every response against them, tests/integration/test_openapi.py).
# prism-cli stays on 5.14 (node >= 18.20.1): 5.15 and later need node 24.
# playwright-core drives Debian's chromium (TG_TEST_PACKAGES) through the admin
# console (tests/integration/console_browser.mjs); it downloads no browser.
TG_NPM_PACKAGES="oauth2-mock-server@7 @stoplight/spectral-cli@6 @stoplight/prism-cli@5.14 playwright-core@1"

tg_install_npm() {
	local dir="${TG_NPM_DIR:-$PWD/build-npm}" missing="" p
	for p in $TG_NPM_PACKAGES; do
		[ -f "$dir/node_modules/${p%@*}/package.json" ] || missing="$missing $p"
	done
	export TG_NPM_DIR="$dir"
	[ -z "$missing" ] && return 0
	# Debian's nodejs comes without npm; NodeSource's nodejs brings its own.
	command -v npm >/dev/null || tg_install_deps npm || return 1
	# The whole list, not only what is missing: npm install --no-save removes
	# the packages it was not given (they are extraneous to it).
	echo "npm installing:$missing (with: $TG_NPM_PACKAGES) into $dir" >&2
	mkdir -p "$dir" && npm install --prefix "$dir" --no-save --no-audit --no-fund \
		--loglevel=error $TG_NPM_PACKAGES >/dev/null
}
