-- wrk script for the sink ceiling: keep-alive POSTs of a ~400-byte CloudEvent-like body, the same
-- size the gateway delivers. The body carries no "sent_ns", so the sink records no latency for it.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/cloudevents+json"
local data = '{"specversion":"1.0","id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","source":"unknown",' ..
  '"type":"auth.failure","time":"2024-01-01T00:00:00.000Z","datacontenttype":"application/json",' ..
  '"data":{"user":"alice.smith@example.com","ip":"203.0.113.42","reason":"invalid_password",' ..
  '"user_agent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",' ..
  '"seq":1}}'
wrk.body = data .. string.rep(" ", math.max(0, 400 - #data))
