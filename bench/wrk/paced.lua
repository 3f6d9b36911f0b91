-- bench/wrk/paced.lua - pace each connection: WRK_DELAY_MS between its
-- requests (bench/lib.py sets it from the wanted total rate). wrk takes
-- whole milliseconds, so the fractional part is carried over to the next
-- delay: the mean delay is WRK_DELAY_MS.
local d = tonumber(os.getenv("WRK_DELAY_MS") or "0")
local carry = 0

function delay()
	carry = carry + d
	local ms = math.floor(carry)
	carry = carry - ms
	return ms
end
