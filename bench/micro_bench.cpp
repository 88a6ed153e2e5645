// hookgate-micro-bench: Google Benchmark micro-benchmarks of the per-event hot path, stage by
// stage. Not part of ctest. Run: build-bench/bench/hookgate-micro-bench [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_payload.hpp"
#include "config/config.hpp"
#include "gateway/common/clock.hpp"
#include "gateway/common/malloc_tuning.hpp"
#include "gateway/event.hpp"
#include "gateway/hooks/chain.hpp"
#include "gateway/pattern.hpp"
#include "gateway/router.hpp"
#include "webhooks/memory_store.hpp"
#include "webhooks/signing.hpp"
#include "webhooks/sqlite_spool.hpp"

namespace fs = std::filesystem;
using namespace hookgate;

namespace {

constexpr const char* kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

// What the gateway receives from the bus: a full envelope as the C++ Publisher sends it (~400 B).
std::string sample_envelope() {
  bench::PayloadBuilder payload("auth.failure");
  Event ev;
  ev.set_string("type", "auth.failure");
  ev.set_string("source", "unknown");
  auto data = Event::parse(std::string("{\"d\":") +
                           std::string(payload.build(12345, 1700000000123456789LL)) + "}");
  ev.doc().AddMember("data", JsonValue(data.value().doc()["d"], ev.allocator()), ev.allocator());
  (void)ev.normalize(now_unix_ms());
  return ev.to_json();
}

// A temporary folder removed at exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hookgate-bench-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void BM_ParseEnvelope(benchmark::State& state) {
  std::string json = sample_envelope();
  int64_t now = now_unix_ms();
  for (auto _ : state) {
    auto ev = Event::parse_envelope(json, now);
    benchmark::DoNotOptimize(ev);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json.size()));
  state.counters["envelope_bytes"] = static_cast<double>(json.size());
}
BENCHMARK(BM_ParseEnvelope);

// Reference, not hookgate code: RapidJSON's DOM parse of the same envelope with and without
// kParseValidateEncodingFlag (what Event::parse uses), to size the cost of UTF-8 validation.
void BM_RapidJsonParseReference(benchmark::State& state) {
  std::string json = sample_envelope();
  bool validate = state.range(0) != 0;
  for (auto _ : state) {
    rapidjson::Document d;
    if (validate) {
      d.Parse<rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());
    } else {
      d.Parse<rapidjson::kParseDefaultFlags>(json.data(), json.size());
    }
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(validate ? "validate UTF-8" : "no validation");
}
BENCHMARK(BM_RapidJsonParseReference)->Arg(1)->Arg(0);

void BM_ToJson(benchmark::State& state) {
  auto ev = Event::parse_envelope(sample_envelope(), now_unix_ms());
  for (auto _ : state) {
    std::string s = ev.value().to_json();
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ToJson);

// parse + normalize + serialize: the envelope's whole trip through the gateway for one delivery.
void BM_ParseNormalizeSerialize(benchmark::State& state) {
  std::string json = sample_envelope();
  int64_t now = now_unix_ms();
  for (auto _ : state) {
    auto ev = Event::parse_envelope(json, now);
    std::string s = ev.value().to_json();
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseNormalizeSerialize);

// A publisher-minimal envelope ({type, data}): normalize() must fill id/source/time too.
void BM_ParseMinimalEnvelope(benchmark::State& state) {
  bench::PayloadBuilder payload("auth.failure");
  std::string json =
      std::string("{\"type\":\"auth.failure\",\"data\":") + std::string(payload.build(1, 1)) + "}";
  int64_t now = now_unix_ms();
  for (auto _ : state) {
    auto ev = Event::parse_envelope(json, now);
    benchmark::DoNotOptimize(ev);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseMinimalEnvelope);

// 100 patterns of every shape; types that match late, early and never.
std::vector<std::string> hundred_patterns() {
  std::vector<std::string> p;
  for (int i = 0; i < 25; ++i)
    p.push_back("service" + std::to_string(i) + ".event.created");                      // exact
  for (int i = 0; i < 25; ++i) p.push_back("svc" + std::to_string(i) + ".*");           // prefix
  for (int i = 0; i < 25; ++i) p.push_back("*.finished" + std::to_string(i));           // suffix
  for (int i = 0; i < 25; ++i) p.push_back("plan:*:stage" + std::to_string(i) + ":*");  // general
  return p;
}

void BM_PatternSet100(benchmark::State& state) {
  PatternSet set(hundred_patterns());
  const std::vector<std::string> types = {"auth.failure", "plan:build:stage24:failed",
                                          "svc3.user.created", "deploy.finished24"};
  const std::string& type = types[static_cast<size_t>(state.range(0))];
  for (auto _ : state) {
    bool m = set.matches(type);
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(type);
}
BENCHMARK(BM_PatternSet100)->DenseRange(0, 3);

// The three declarative hooks of bench/hooks/ (transform remove/set/rename/copy, transform set,
// veto that does not match), loaded through HookChain::load from a temp dir.
void BM_HookChain3Declarative(benchmark::State& state) {
  TempDir tmp;
  for (const auto& f : fs::directory_iterator(HOOKGATE_BENCH_HOOKS_DIR))
    fs::copy_file(f.path(), tmp.path / f.path().filename());
  config::HooksConfig cfg;
  cfg.directories = {tmp.path.string()};
  cfg.hot_reload = false;
  config::Diagnostics errors;
  auto chain = hooks::HookChain::load(cfg, errors);
  if (!errors.empty() || chain->loaded_count() != 3) {
    state.SkipWithError(
        ("chain did not load 3 hooks: " + (errors.empty() ? std::string() : errors[0].str()))
            .c_str());
    return;
  }
  std::string json = sample_envelope();
  DiagnosticSink sink = [](DiagnosticEvent) {};
  int64_t now = now_unix_ms();
  bool with_parse = state.range(0) != 0;
  auto base = Event::parse_envelope(json, now);
  uint64_t vetoed = 0;
  for (auto _ : state) {
    if (with_parse) {
      auto ev = Event::parse_envelope(json, now);
      auto out = chain->run(ev.value(), sink);
      vetoed += out.vetoed;
    } else {
      state.PauseTiming();
      Event ev = base.value().clone();
      state.ResumeTiming();
      auto out = chain->run(ev, sink);
      vetoed += out.vetoed;
    }
  }
  if (vetoed) state.SkipWithError("benchmark event was vetoed");
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(with_parse ? "parse+chain" : "chain only");
}
BENCHMARK(BM_HookChain3Declarative)->Arg(1)->Arg(0);

config::WebhookConfig signed_webhook(const std::string& name) {
  config::WebhookConfig w;
  w.name = name;
  w.url = "http://127.0.0.1:9/hook";
  w.secrets = {kSecret};
  return w;
}

void BM_HmacSha256Hex(benchmark::State& state) {
  std::string body = sample_envelope();
  for (auto _ : state) {
    std::string s = webhooks::hmac_sha256_hex(kSecret, body);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HmacSha256Hex);

// Reference, not hookgate code: the same HMAC with the key schedule done once (an EVP_MAC_CTX
// keyed at configuration time and duplicated per message) instead of HMAC()'s one-shot
// EVP_Q_mac, which fetches the HMAC and SHA-256 implementations and keys a new context per call.
void BM_HmacSha256PrekeyedReference(benchmark::State& state) {
  std::string body = sample_envelope();
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* keyed = EVP_MAC_CTX_new(mac);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                         OSSL_PARAM_construct_end()};
  EVP_MAC_init(keyed, reinterpret_cast<const unsigned char*>(kSecret), std::strlen(kSecret),
               params);
  unsigned char out[EVP_MAX_MD_SIZE];
  for (auto _ : state) {
    EVP_MAC_CTX* c = EVP_MAC_CTX_dup(keyed);
    EVP_MAC_update(c, reinterpret_cast<const unsigned char*>(body.data()), body.size());
    size_t len = 0;
    EVP_MAC_final(c, out, &len, sizeof out);
    EVP_MAC_CTX_free(c);
    benchmark::DoNotOptimize(out);
  }
  EVP_MAC_CTX_free(keyed);
  EVP_MAC_free(mac);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HmacSha256PrekeyedReference);

void BM_StandardWebhooksSignature(benchmark::State& state) {
  std::string body = sample_envelope();
  std::vector<std::string> secrets = {kSecret};
  for (auto _ : state) {
    auto s =
        webhooks::standard_webhooks_signature(secrets, "msg_2Lg0123456789abcdef", 1700000000, body);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StandardWebhooksSignature);

// Every header of one signed attempt (X-Signature + Standard Webhooks triple): what the dispatcher
// computes per request.
void BM_BuildAttemptHeaders(benchmark::State& state) {
  auto w = signed_webhook("sink");
  webhooks::Delivery d;
  d.id = "msg_2Lg0123456789abcdef";
  d.webhook = w.name;
  d.event_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  d.event_type = "auth.failure";
  d.body = std::make_shared<const std::string>(sample_envelope());
  for (auto _ : state) {
    auto h = webhooks::build_attempt_headers(w, d, 1700000000);
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildAttemptHeaders);

// The dispatcher's path: keys derived once per webhook configuration (SigningKeys), reused.
void BM_BuildAttemptHeadersKeyed(benchmark::State& state) {
  auto w = signed_webhook("sink");
  auto keys = webhooks::SigningKeys::make(w.secrets);
  webhooks::Delivery d;
  d.id = "msg_2Lg0123456789abcdef";
  d.webhook = w.name;
  d.event_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  d.event_type = "auth.failure";
  d.body = std::make_shared<const std::string>(sample_envelope());
  for (auto _ : state) {
    auto h = webhooks::build_attempt_headers(w, *keys.value(), d, 1700000000);
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildAttemptHeadersKeyed);

// Routing an event to N webhooks: serializes the body once, creates N deliveries (new ids).
void BM_Route(benchmark::State& state) {
  std::vector<config::WebhookConfig> hooks;
  for (int i = 0; i < state.range(0); ++i)
    hooks.push_back(signed_webhook("sink-" + std::to_string(i)));
  Router router(hooks);
  auto ev = Event::parse_envelope(sample_envelope(), now_unix_ms());
  std::vector<webhooks::Delivery> out;
  for (auto _ : state) {
    out.clear();
    router.route(ev.value(), 1700000000000, out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Route)->Arg(1)->Arg(16);

// n events, each with its own copy of `envelope` as its body, routed to `fanout` webhooks
// ("sink0", …) that share it, as the router does for webhooks with the same body mode.
std::vector<webhooks::Delivery> make_batch(size_t n, size_t fanout, uint64_t& seq,
                                           const std::string& envelope) {
  std::vector<webhooks::Delivery> batch;
  batch.reserve(n * fanout);
  for (size_t i = 0; i < n; ++i) {
    const std::string event_id = "ev_bench" + std::to_string(seq);
    const auto body = std::make_shared<const std::string>(envelope);
    for (size_t w = 0; w < fanout; ++w) {
      webhooks::Delivery d;
      d.id = "msg_bench" + std::to_string(seq++);
      d.webhook = "sink" + std::to_string(w);
      d.event_id = event_id;
      d.event_type = "auth.failure";
      d.body = body;
      d.created_ms = 1700000000000;
      batch.push_back(std::move(d));
    }
  }
  return batch;
}

// One cycle per iteration: add B events × F webhooks, claim the deliveries, complete each as
// delivered. Items = deliveries. For SQLite, add() waits for the group commit; complete() is
// queued.
void spool_cycle(benchmark::State& state, webhooks::DeliveryStore& store) {
  const auto b = static_cast<size_t>(state.range(0));
  const auto fanout = static_cast<size_t>(state.range(1));
  const std::string envelope = sample_envelope();
  uint64_t seq = 0;
  webhooks::AttemptOutcome ok{.kind = webhooks::AttemptOutcome::Kind::Delivered};
  for (auto _ : state) {
    state.PauseTiming();
    auto batch = make_batch(b, fanout, seq, envelope);
    state.ResumeTiming();
    if (auto st = store.add(std::move(batch)); !st) {
      state.SkipWithError(st.error().message.c_str());
      return;
    }
    for (size_t w = 0; w < fanout; ++w) {
      const std::string webhook = "sink" + std::to_string(w);
      size_t done = 0;
      const int64_t give_up = now_steady_ns() + 5000000000LL;
      while (done < b) {
        auto claimed = store.claim_due(webhook, now_unix_ms() + 1000, b);
        if (claimed.empty()) {  // SQLite: published to the claim cache right after the commit
          if (now_steady_ns() > give_up) {
            state.SkipWithError("added deliveries never became claimable");
            return;
          }
          continue;
        }
        for (const auto& d : claimed) store.complete(d, ok);
        done += claimed.size();
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(b * fanout));
}

void BM_SqliteSpoolCycle(benchmark::State& state) {
  TempDir tmp;
  config::SpoolConfig cfg;
  cfg.path = (tmp.path / "spool.db").string();
  auto spool = webhooks::SqliteSpool::open(cfg);
  if (!spool) {
    state.SkipWithError(spool.error().message.c_str());
    return;
  }
  spool_cycle(state, *spool.value());
  (void)spool.value()->flush();
}
// Args: events per add(), webhooks per event.
BENCHMARK(BM_SqliteSpoolCycle)
    ->Args({1, 1})
    ->Args({64, 1})
    ->Args({512, 1})
    ->Args({32, 16})
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_MemoryStoreCycle(benchmark::State& state) {
  webhooks::MemoryDeliveryStore store;
  spool_cycle(state, store);
}
BENCHMARK(BM_MemoryStoreCycle)
    ->Args({1, 1})
    ->Args({64, 1})
    ->Args({512, 1})
    ->Args({32, 16})
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the spool and chain log their opening at info
  tune_malloc_for_gateway();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
