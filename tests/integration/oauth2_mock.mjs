/*
 * oauth2_mock.mjs - a real OAuth2 authorization server for the vendor token
 * tests (test_oauth2_server.py starts it through the oauth2_server fixture):
 * the npm package oauth2-mock-server on 127.0.0.1:PORT, which issues
 * client-credentials tokens. The package does not authenticate clients, so
 * its beforeResponse hook does: HTTP Basic (RFC 6749 2.3.1: id and secret
 * form-urlencoded, then base64) or client_id/client_secret in the body,
 * checked against CLIENT_ID and the secret in SECRET_FILE; anything else
 * gets 401 invalid_client. Every token request is appended to RECORD as a
 * JSON line (how the client authenticated, scope, audience; the secret only
 * as a yes/no).
 *
 * usage: node oauth2_mock.mjs PORT RECORD CLIENT_ID SECRET_FILE
 * The package is looked up in $TG_NPM_DIR/node_modules (scripts/deps.sh).
 */
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [port, record, clientId, secretFile] = process.argv.slice(2);
const npmDir = process.env.TG_NPM_DIR;
const require = createRequire(path.join(npmDir, "package.json"));
const { OAuth2Server } = require("oauth2-mock-server");
const secret = fs.readFileSync(secretFile, "utf8").replace(/\n$/, "");

/* RFC 6749 Appendix B: '+' is a space, then percent-decoding. */
const formDecode = (s) => decodeURIComponent(s.replace(/\+/g, " "));

function clientOf(req) {
  const h = req.headers.authorization;
  if (h !== undefined && h.startsWith("Basic ")) {
    const raw = Buffer.from(h.slice(6), "base64").toString("utf8");
    const i = raw.indexOf(":");
    if (i < 0) return { how: "basic", id: null, secret: null, user: raw };
    return { how: "client_secret_basic", user: raw.slice(0, i),
             id: formDecode(raw.slice(0, i)), secret: formDecode(raw.slice(i + 1)) };
  }
  return { how: "client_secret_post", id: req.body.client_id ?? null,
           secret: req.body.client_secret ?? null, user: null };
}

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
server.service.on("beforeResponse", (resp, req) => {
  const c = clientOf(req);
  const ok = c.id === clientId && c.secret === secret;
  const body = { ...req.body };
  if ("client_secret" in body) body.client_secret = "(present)";
  fs.appendFileSync(record, JSON.stringify({
    path: req.path, content_type: req.headers["content-type"] ?? null,
    client_auth: c.how, basic_user: c.user, client_id: c.id, secret_ok: c.secret === secret,
    form: body, accepted: ok,
  }) + "\n");
  if (!ok) {
    resp.statusCode = 401;
    resp.body = { error: "invalid_client" };
  }
});
await server.start(Number(port), "127.0.0.1");
console.log(`listening ${port}`);
