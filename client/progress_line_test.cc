#include "client/progress_line.h"

#include "gtest/gtest.h"

namespace yirage::client {
namespace {

yirage::v1::Job Running() {
  yirage::v1::Job job;
  job.set_job_id("job-0123456789");
  job.set_state(yirage::v1::RUNNING);
  job.set_candidates_generated(8);
  job.set_candidates_pending(3);
  job.set_candidates_evaluated(5);
  job.set_candidates_failed(1);
  job.set_created_unix(1000);
  job.set_started_unix(1002);
  job.mutable_best()->set_time_us(12.34);
  job.mutable_best()->set_speedup(2.5);
  return job;
}

TEST(ProgressLineTest, AWideTerminalGetsEveryPart) {
  const std::string line = TerminalProgressLine(Running(), 1012, 160);
  EXPECT_EQ(line.rfind("[", 0), 0u) << line;
  for (const char* part :
       {"job-0123456789 running", "5/8", "1 failed", "best 2.50x", "0.5/s", "12.0s"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
  EXPECT_LT(line.size(), 160u);
}

TEST(ProgressLineTest, ANarrowTerminalKeepsTheJobProgressAndBest) {
  for (int columns : {80, 60, 50, 40}) {
    const std::string line = TerminalProgressLine(Running(), 1012, columns);
    SCOPED_TRACE(line);
    EXPECT_LE(static_cast<int>(line.size()), columns - 1);
    EXPECT_NE(line.find("job-0123456789"), std::string::npos);
    if (columns >= 50) {
      EXPECT_NE(line.find("5/8"), std::string::npos);
    }
  }
  // The rate goes before the best.
  const std::string mid = TerminalProgressLine(Running(), 1012, 70);
  EXPECT_EQ(mid.find("/s"), std::string::npos) << mid;
  EXPECT_NE(mid.find("best"), std::string::npos) << mid;
}

TEST(ProgressLineTest, AnEndedJobShowsHowLongItRan) {
  yirage::v1::Job job = Running();
  job.set_state(yirage::v1::SUCCEEDED);
  job.set_candidates_pending(0);
  job.set_finished_unix(1125);
  const std::string line = TerminalProgressLine(job, 5000, 120);
  EXPECT_NE(line.find("2m05s"), std::string::npos) << line;
  EXPECT_NE(line.find("succeeded"), std::string::npos) << line;
  EXPECT_EQ(line.find("/s"), std::string::npos) << "no rate once ended: " << line;
  EXPECT_NE(line.find("best 2.50x (12.3 us)"), std::string::npos) << "the time once ended";
  job.mutable_best()->set_final_of(7);
  EXPECT_NE(TerminalProgressLine(job, 5000, 120).find("winner 2.50x (12.3 us, final round)"),
            std::string::npos);
}

// The final round's rows are pending but not candidates: the count of
// candidates done does not go back while it runs.
TEST(ProgressLineTest, TheFinalRoundDoesNotTakeBackCandidatesDone) {
  yirage::v1::Job job = Running();
  job.set_candidates_generated(4);
  job.set_candidates_evaluated(4);
  job.set_candidates_pending(3);
  EXPECT_NE(PlainProgressLine(job).find(" 4/4 candidates"), std::string::npos)
      << PlainProgressLine(job);
}

TEST(ProgressLineTest, ShortDurations) {
  EXPECT_EQ(ShortDuration(3.21), "3.2s");
  EXPECT_EQ(ShortDuration(65), "1m05s");
  EXPECT_EQ(ShortDuration(3720), "1h02m");
  EXPECT_EQ(ShortDuration(-1), "0.0s");
}

TEST(ProgressLineTest, PlainLinesChangeOnlyWithTheJob) {
  const yirage::v1::Job job = Running();
  EXPECT_EQ(PlainProgressLine(job),
            "job-0123456789 RUNNING 5/8 candidates (1 failed) best 2.50x over baseline");
}

}  // namespace
}  // namespace yirage::client
