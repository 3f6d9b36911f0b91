-- bench/wrk/paced.lua - pace each connection: WRK_DELAY_MS between its
-- requests (bench/lib.py sets it from the wanted total rate).
local d = tonumber(os.getenv("WRK_DELAY_MS") or "0")

function delay()
	return d
end
