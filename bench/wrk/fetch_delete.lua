-- wrk script: fetch+delete. Each connection sends GET {path}; the id of every message fetched
-- (X-Message-Id) is then deleted with DELETE {path}/{id} by the next request of the same
-- wrk thread. Latency figures are per HTTP request (GET or DELETE).
-- Prints one "RESULT key=value ..." line that bench/throughput.py parses.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  pending = {}
  fetched = 0
  deletes = 0
end

function request()
  local id = table.remove(pending)
  if id then
    deletes = deletes + 1
    return wrk.format("DELETE", wrk.path .. "/" .. id)
  end
  return wrk.format("GET", wrk.path)
end

function response(status, headers, body)
  if status == 200 then
    local id = headers["X-Message-Id"]
    if id then
      fetched = fetched + 1
      table.insert(pending, id)
    end
  end
end

done = function(summary, latency, requests)
  local fetched_total, deletes_total = 0, 0
  for _, thread in ipairs(threads) do
    fetched_total = fetched_total + thread:get("fetched")
    deletes_total = deletes_total + thread:get("deletes")
  end
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d non2xx=%d socket_errors=%d fetched=%d deletes=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.status, e.connect + e.read + e.write + e.timeout, fetched_total, deletes_total))
end
