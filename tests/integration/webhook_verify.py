"""
webhook_verify.py - an independent Standard Webhooks verifier written with
hmac, hashlib and base64 only, for tests that receive tidegate's webhooks:
the gateway's end-to-end tests use it on what their receivers get, and
test_webhook_sign.py checks the C signer's samples with it.
"""
import base64
import hashlib
import hmac
import time


def secret_key(secret):
    """The HMAC key of a "whsec_<base64>" secret."""
    if not secret.startswith("whsec_"):
        raise ValueError("not a whsec_ secret")
    return base64.b64decode(secret[len("whsec_"):], validate=True)


def sign(secret, msg_id, timestamp, body):
    """"v1,<base64 HMAC-SHA256 of id.timestamp.body>" for one secret."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify(secret, headers, body, tolerance=300, now=None):
    """True when one v1 signature in headers["webhook-signature"] matches.

    headers: a mapping with webhook-id, webhook-timestamp and
    webhook-signature (any case); body: the raw bytes received.
    tolerance: seconds the timestamp may differ from now (None: no check).
    """
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, ts, sigs = h["webhook-id"], h["webhook-timestamp"], h["webhook-signature"]
    if tolerance is not None:
        now = time.time() if now is None else now
        if abs(now - int(ts)) > tolerance:
            return False
    want = sign(secret, msg_id, ts, body)
    return any(hmac.compare_digest(want, s) for s in sigs.split(" ") if s.startswith("v1,"))
