#!/usr/bin/env python3
"""layers.py - checks that includes point down the layers of DESIGN.md.

Reads the #include "..." lines of every src/<module>/*.c (and src/tidegate.c,
the entry point), follows them through the headers they reach, and checks
each module it lands in against ALLOWED below; then checks that the folders
form no cycle. Prints each offending chain and exits 1.

The unit tests mirror the sources: tests/unit/<module>/test_<file>.c tests
src/<module>/<file>.c. Each is checked to name a source that exists, and
its includes like its module's, plus the harness (tests/unit/harness/) and
the few modules TEST_EXTRA names with the reason.

Run: python3 tests/layers.py [SOURCE_ROOT]   (meson test layers runs it)
The table is documented in docs/architecture.md (Modules).
"""
import os
import re
import sys

# Owner of each public header (include/tidegate/); a header beside a
# module's sources belongs to that module.
OWNER = {
    'clock.h': 'core', 'config.h': 'core', 'crypto.h': 'core', 'errors.h': 'core',
    'ids.h': 'core', 'log.h': 'core', 'map.h': 'core', 'metrics.h': 'core',
    'problems.h': 'core', 'util.h': 'core', 'worker.h': 'core', 'notify.h': 'core',
    'priv.h': 'core', 'pidfile.h': 'core', 'rate.h': 'core', 'hblock.h': 'core', 'sockwrite.h': 'core',
    'json.h': 'json',
    'state.h': 'state', 'run_records.h': 'state',
    'http.h': 'http', 'frontdoor.h': 'http', 'head.h': 'http', 'target.h': 'http',
    'proxy_proto.h': 'http', 'realip.h': 'http',
    'multipart.h': 'http', 'routes.h': 'http', 'body_check.h': 'http',
    'upstream.h': 'upstream',
    'token.h': 'auth', 'keys.h': 'auth',
    'ops.h': 'ops',
    'dex.h': 'dex',
    'sim.h': 'sim', 'registry.h': 'sim',
    'webhook.h': 'webhook',
    'gateway.h': 'gateway', 'gateway_config.h': 'gateway', 'feature_apis.h': 'gateway',
    'quota.h': 'gateway',
    'jobs.h': 'jobs', 'runs.h': 'runs', 'limits.h': 'limits',
    'emulator.h': 'emulator',
}

# What each module may include besides itself. core <- json <- state (the
# only SQL) <- http/upstream/auth (auth uses upstream) <- ops (the canonical
# operation numbers) <- dex/sim <- gateway (the request core) <-
# jobs/webhook/runs (the features, which never include each other) <- entry
# points; the emulator uses core, json, http only.
BASE = {'core', 'json'}
STATE = BASE | {'state'}
ALLOWED = {
    'core': set(),
    'json': {'core'},
    'state': BASE,
    'http': STATE,
    'upstream': STATE,
    'auth': STATE | {'upstream'},
    'ops': set(),
    'dex': STATE | {'http', 'upstream', 'auth', 'ops'},
    'sim': STATE | {'http', 'upstream', 'auth', 'ops'},
    'emulator': BASE | {'http'},
    'gateway': STATE | {'http', 'upstream', 'auth', 'ops', 'dex', 'sim'},
    'jobs': STATE | {'http', 'upstream', 'auth', 'ops', 'dex', 'sim', 'gateway'},
    'webhook': STATE | {'http', 'upstream', 'auth', 'ops', 'dex', 'sim', 'gateway'},
    'runs': STATE | {'http', 'upstream', 'auth', 'ops', 'dex', 'sim', 'gateway'},
    'limits': STATE | {'http', 'upstream', 'auth', 'ops', 'dex', 'sim', 'gateway'},    'entry': set(OWNER.values()) | {'gateway'},
}

# What a unit test may reach besides its module's layers: the tables or
# servers it drives its module with.
TEST_EXTRA = {
    'http/test_router.c': {'dex', 'sim', 'ops'},	# the real route tables
    'dex/test_checks.c': {'sim'},	# both tables' checks, driven alike
    'sim/test_case_entries.c': {'emulator'},	# against the emulator's rules
    'upstream/test_pool.c': {'http'},	# its servers are the http listener
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def resolve(root, here, name):
    """Path of an #include "name" seen in directory here, or None. A unit
    test also finds the harness and its module's private headers (the
    include_directories of tests/unit/<module>/meson.build)."""
    bases = [here, os.path.join(root, 'include'), os.path.join(root, 'src')]
    rel = os.path.relpath(here, root).split(os.sep)
    if rel[:2] == ['tests', 'unit']:
        bases.append(os.path.join(root, 'tests', 'unit', 'harness'))
        src = os.path.join(root, 'src')
        bases += [os.path.join(src, d) for d in sorted(os.listdir(src))]
    for base in bases:
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def owner(root, path):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if parts[0] == 'include':
        return OWNER.get(parts[-1], '?' + rel)
    if parts[0] == 'tests':
        return 'harness' if parts[2] == 'harness' else parts[2]
    if parts == ['src', 'tidegate.c'] or parts[-2:] == ['emulator', 'main.c']:
        return 'entry'
    return parts[1]


def reached(root, path, seen):
    """Every file path includes, directly or through headers (DFS chains)."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    for name in INCLUDE.findall(text):
        p = resolve(root, os.path.dirname(path), name)
        if p is None or p in seen:
            continue
        seen[p] = path
        reached(root, p, seen)
    return seen


def chain(seen, start, p):
    out = [p]
    while out[-1] != start:
        out.append(seen[out[-1]])
    return ' <- '.join(os.path.basename(x) for x in out)


def check_tests(root, bad):
    """The unit tests' mirror of src/ and their includes; their count."""
    top = os.path.join(root, 'tests', 'unit')
    n = 0
    for mod in sorted(os.listdir(top)):
        full = os.path.join(top, mod)
        if not os.path.isdir(full) or mod == 'harness':
            continue
        for f in sorted(x for x in os.listdir(full) if x.endswith('.c')):
            rel = mod + '/' + f
            n += 1
            if mod not in ALLOWED or not f.startswith('test_') or not os.path.isfile(
                    os.path.join(root, 'src', mod, f[len('test_'):])):
                bad.append('tests/unit/%s: names no src/%s/%s' % (rel, mod, f[len('test_'):]))
                continue
            may = ALLOWED[mod] | {mod, 'harness'} | TEST_EXTRA.get(rel, set())
            path = os.path.join(full, f)
            seen = reached(root, path, {})
            for p in seen:
                if owner(root, p) not in may:
                    bad.append('tests/unit/%s (%s) reaches %s (%s): %s' %
                               (rel, mod, os.path.relpath(p, root), owner(root, p),
                                chain(seen, path, p)))
    return n


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), '..'))
    sources = [os.path.join(root, 'src', 'tidegate.c')]
    for d in sorted(os.listdir(os.path.join(root, 'src'))):
        full = os.path.join(root, 'src', d)
        if os.path.isdir(full):
            sources += [os.path.join(full, f) for f in sorted(os.listdir(full))
                        if f.endswith('.c')]
    bad = []
    edges = {}
    for src in sources:
        mod = owner(root, src)
        if mod not in ALLOWED:
            bad.append('%s: module %s is not in the layer table' %
                       (os.path.relpath(src, root), mod))
            continue
        seen = reached(root, src, {})
        for p in seen:
            to = owner(root, p)
            if to == mod:
                continue
            if mod != 'entry':
                edges.setdefault(mod, set()).add(to)
            if to not in ALLOWED[mod]:
                bad.append('%s (%s) reaches %s (%s): %s' %
                           (os.path.relpath(src, root), mod, os.path.relpath(p, root), to,
                            chain(seen, src, p)))
    # No cycle between folders (ALLOWED has none, but say so if it gets one).
    state = {}

    def visit(m, stack):
        state[m] = 1
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                bad.append('cycle: ' + ' -> '.join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    tests = check_tests(root, bad)
    for line in bad:
        print(line)
    if bad:
        return 1
    print('layers OK: %d sources, %d modules, %d unit tests' % (len(sources), len(edges), tests))
    return 0


if __name__ == '__main__':
    sys.exit(main())
