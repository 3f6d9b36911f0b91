-- bench/wrk/post_file.lua - every request is a POST of the file named by
-- WRK_BODY_FILE (read once) with WRK_CONTENT_TYPE (default application/json).
local f = assert(io.open(assert(os.getenv("WRK_BODY_FILE"), "WRK_BODY_FILE unset"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = os.getenv("WRK_CONTENT_TYPE") or "application/json"
