"""
The gateway's front door: what reaches a handler and what is refused before
it. Raw sockets where an HTTP client library would tidy the request up.
"""
import json
import socket
import time

import pytest
import requests

from conftest import TEST_KEY

JSON_ENDPOINTS = [
    ("dex", "/public/v1/export/activities"),
    ("dex", "/public/v1/import/activities"),
    ("dex", "/public/v1/authenticate"),
    ("sim", "/api/v1/simulations"),
    ("sim", "/tidegate/v1/sweeps"),
]


def raw(port, data, timeout=5.0, read_all=True):
    """Send bytes, read until the peer closes (or one answer when read_all is
    False); returns the bytes read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                     if l.lower().startswith(b"content-length:")]
                if n and len(body) >= n[0]:
                    break
        return out
    finally:
        s.close()


def parse(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode()
    return status, headers, body


@pytest.mark.parametrize("svc,path", JSON_ENDPOINTS)
def test_empty_json_body_is_400_and_gateway_lives(gateway, svc, path):
    port = gateway.ports[svc]
    req = (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TEST_KEY}\r\n"
           "Content-Type: application/json\r\nContent-Length: 0\r\n\r\n").encode()
    status, _, body = parse(raw(port, req, read_all=False))
    assert status == 400, body
    doc = json.loads(body)
    assert doc["statusCode"] == 400 and doc["error"] and doc["message"]
    # the process is alive and serves the next request
    r = requests.get(gateway.admin + "/healthz", timeout=5)
    assert r.status_code == 200
