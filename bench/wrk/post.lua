-- wrk script: durable adds, POST {path} with a 100-byte body (bench/throughput.py).
-- Prints one "RESULT key=value ..." line that throughput.py parses.
wrk.method = "POST"
wrk.body = string.rep("m", 100)
wrk.headers["Content-Type"] = "text/plain"

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d non2xx=%d socket_errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.status, e.connect + e.read + e.write + e.timeout))
end
