#!/usr/bin/env python3
"""
bench/walk.py - which of tidegate's folders one kind of request walks
through.

Runs tidegate (a build with debug information, so that callgrind knows
each function's source file) under valgrind --tool=callgrind with
collection off, in front of tidegate-emulator; creates an export through
the gateway, then switches instrumentation on (callgrind_control -i on), sends
N proxied GETs of the request asked for, switches it off and dumps. Prints
the instructions spent in each src/<folder>/ (and outside: libevent, libc)
and the functions of each folder.

    meson setup build-prof --buildtype=debugoptimized -Dtests=false && ninja -C build-prof
    /usr/bin/python3 bench/walk.py --build build-prof [--what export|passthrough] [-n 50]
"""
import argparse
import collections
import os
import re
import subprocess
import tempfile
import time

import requests

import lib

LINE = re.compile(r'^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S+):(\S+)')


def folder(path):
    m = re.search(r'(?:^|/)src/([a-z]+)/', path)
    if m:
        return 'src/' + m.group(1)
    if path.endswith('src/tidegate.c'):
        return 'src/tidegate.c'
    return 'outside (' + os.path.basename(path) + ')' if path != '???' else 'outside (???)'


def annotate(out):
    ann = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', out],
                         capture_output=True, text=True, check=True).stdout
    per = collections.defaultdict(int)
    funcs = collections.defaultdict(set)
    for line in ann.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        ir, path, fn = int(m.group(1).replace(',', '')), m.group(2), m.group(3)
        f = folder(path)
        if f.startswith('outside'):
            f = 'outside'
        per[f] += ir
        funcs[f].add(fn.split("'")[0])
    return per, funcs


def export_id(gw, emu_dex):
    r = requests.post(gw.url + '/public/v1/export/activities', json={'projectId': 'P-DEMO'},
                      headers=gw.headers, timeout=30)
    r.raise_for_status()
    return r.json()['correlationId']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default=os.path.join(lib.ROOT, 'build-prof'))
    ap.add_argument('--what', choices=('export', 'passthrough'), default='export')
    ap.add_argument('-n', type=int, default=50)
    a = ap.parse_args()
    emu = lib.emulator(build=a.build)
    out = tempfile.mktemp(prefix='tg-walk-callgrind-')
    prefix = ['valgrind', '--tool=callgrind', '--instr-atstart=no',
              f'--callgrind-out-file={out}']
    gw = None
    try:
        gw = lib.tidegate(emu.dex, overrides={'sim': emu.sim_config(),
                                             'dex': {'url': emu.dex}},
                          build=a.build, prefix=prefix)
        lib.wait_tokens(gw, timeout=120)
        path = ('/public/v1/export?correlationId=' + export_id(gw, emu.dex)
                if a.what == 'export' else '/public/v1/anything-else')
        requests.get(gw.url + path, headers=gw.headers, timeout=60)	# warm
        pid = str(gw.proc.pid)
        subprocess.run(['callgrind_control', '-i', 'on', pid], check=True,
                       capture_output=True)
        for _ in range(a.n):
            requests.get(gw.url + path, headers=gw.headers, timeout=60)
        subprocess.run(['callgrind_control', '-i', 'off', pid], check=True,
                       capture_output=True)
        subprocess.run(['callgrind_control', '-d', pid], check=True, capture_output=True)
        time.sleep(0.5)
        dumps = sorted(p for p in os.listdir(os.path.dirname(out))
                       if p.startswith(os.path.basename(out)))
        per, funcs = annotate(os.path.join(os.path.dirname(out), dumps[-1]))
    finally:
        if gw is not None:
            gw.stop()
        emu.stop()
        for p in os.listdir(os.path.dirname(out)):
            if p.startswith(os.path.basename(out)):
                os.unlink(os.path.join(os.path.dirname(out), p))
    total = sum(per.values()) or 1
    print(f'GET {path.split("?")[0]} x {a.n}: instructions by folder')
    for f, ir in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f'  {f:16} {ir / a.n:10,.0f} per request  {100 * ir / total:5.1f} %')
    for f in sorted(k for k in funcs if k.startswith('src')):
        print(f'{f}: ' + ' '.join(sorted(funcs[f])))


if __name__ == '__main__':
    main()
