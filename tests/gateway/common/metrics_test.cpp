#include "gateway/common/metrics.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hookgate::metrics {
namespace {

TEST(HistogramTest, EachObservationLandsInTheFirstBucketThatHoldsIt) {
  Histogram h;
  h.observe_ns(50'000);          // exactly the first bound (le is inclusive)
  h.observe_ns(50'001);          // just past it: the second bucket
  h.observe_ns(-5);              // a clock that stepped back counts as zero, never as huge
  h.observe_ns(3'000'000);       // 3 ms: the 5 ms bucket
  h.observe_ns(31'000'000'000);  // past the last bound: only +Inf holds it
  EXPECT_EQ(h.bucket(0), 2u);
  EXPECT_EQ(h.bucket(1), 1u);
  EXPECT_EQ(h.bucket(6), 1u);
  EXPECT_EQ(h.bucket(Histogram::kBounds.size()), 1u);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_NEAR(h.sum_seconds(), 0.00005 + 0.000050001 + 0.003 + 31, 1e-9);
}

TEST(HistogramTest, PrometheusTextAgreesOnInfAndCount) {
  Histogram& h = histogram("hookgate_test_histogram_seconds", "test", {{"case", "render"}});
  h.observe_ns(1'000);           // first bucket
  h.observe_ns(40'000'000'000);  // beyond 30 s
  const std::string text = Registry::global().render_prometheus();
  EXPECT_NE(text.find("hookgate_test_histogram_seconds_bucket{case=\"render\",le=\"5e-05\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hookgate_test_histogram_seconds_bucket{case=\"render\",le=\"30\"} 1\n"),
            std::string::npos);
  // The le spellings dashboards select on stay as they were ("%g"), whatever prints the sums.
  EXPECT_NE(text.find("hookgate_test_histogram_seconds_bucket{case=\"render\",le=\"0.0005\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hookgate_test_histogram_seconds_bucket{case=\"render\",le=\"+Inf\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("hookgate_test_histogram_seconds_count{case=\"render\"} 2\n"),
            std::string::npos);
}

// Found in review: "%g" printed 6 significant digits, so a _sum past 1e6 s moved in 10 s steps.
TEST(HistogramTest, ALargeSumKeepsItsPrecision) {
  Histogram& h = histogram("hookgate_test_precision_seconds", "test", {{"case", "sum"}});
  h.observe_ns(1'234'567'891'000'000);  // 1,234,567.891 s
  const std::string text = Registry::global().render_prometheus();
  EXPECT_NE(text.find("hookgate_test_precision_seconds_sum{case=\"sum\"} 1234567.891\n"),
            std::string::npos)
      << text;
}

// A removed webhook's series leave the rendering, only its own (not a name it is the start of,
// nor one whose value merely contains the label), and come back when looked up again.
TEST(RegistryTest, AHiddenLabelLeavesTheRenderingUntilLookedUpAgain) {
  Registry registry;
  registry.counter("t_total", "t", {{"webhook", "a"}, {"outcome", "ok"}}).inc(3);
  registry.gauge("t_gauge", "t", {{"webhook", "a"}}).set(1);
  registry.histogram("t_seconds", "t", {{"webhook", "a"}}).observe_ns(1000);
  registry.counter("t_total", "t", {{"webhook", "ab"}, {"outcome", "ok"}}).inc();
  registry.counter("t_total", "t", {{"note", "x,webhook=\"a\""}}).inc();
  registry.counter("t_total", "t", {{"path", "c:\\"}, {"webhook", "a"}}).inc();  // ends in `\`
  registry.hide_label("webhook", "a");
  std::string text = registry.render_prometheus();
  EXPECT_EQ(text.find("webhook=\"a\""), std::string::npos) << text;
  EXPECT_NE(text.find("t_total{webhook=\"ab\",outcome=\"ok\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_total{note="), std::string::npos) << text;
  // Added back: it continues where it was.
  registry.counter("t_total", "t", {{"webhook", "a"}, {"outcome", "ok"}}).inc();
  text = registry.render_prometheus();
  EXPECT_NE(text.find("t_total{webhook=\"a\",outcome=\"ok\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_gauge{webhook=\"a\"} 1\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace hookgate::metrics
