#include "server/job_watch.h"

#include "gtest/gtest.h"

namespace yirage::server {
namespace {

using yirage::v1::Candidate;
using yirage::v1::Job;
using yirage::v1::JobEvent;

Candidate Cand(int64_t id, yirage::v1::CandidateStatus status) {
  Candidate c;
  c.set_candidate_id(id);
  c.set_status(status);
  return c;
}

TEST(JobEventsTest, ASnapshotFirstThenCandidatesBestAndStateInThatOrder) {
  Job queued;
  queued.set_state(yirage::v1::RUNNING);
  std::vector<Candidate> at_start = {Cand(1, yirage::v1::VERIFIED), Cand(2, yirage::v1::LEASED),
                                     Cand(3, yirage::v1::PENDING)};
  std::set<int64_t> seen;
  auto first = JobEvents(nullptr, queued, &at_start, &seen);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind(), JobEvent::SNAPSHOT);
  EXPECT_EQ(seen, std::set<int64_t>{1}) << "the snapshot covers what finished before";

  // Nothing changed: nothing to say.
  EXPECT_TRUE(JobEvents(&queued, queued, nullptr, &seen).empty());

  Job done = queued;
  done.set_state(yirage::v1::SUCCEEDED);
  done.mutable_best()->set_candidate_id(3);
  done.mutable_best()->set_time_us(4.0);
  std::vector<Candidate> at_end = {Cand(3, yirage::v1::VERIFIED), Cand(1, yirage::v1::VERIFIED),
                                   Cand(2, yirage::v1::MISMATCH)};
  auto last = JobEvents(&queued, done, &at_end, &seen);
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[0].kind(), JobEvent::CANDIDATE);
  EXPECT_EQ(last[0].candidate().candidate_id(), 2);
  EXPECT_EQ(last[0].candidate().status(), yirage::v1::MISMATCH);
  EXPECT_EQ(last[1].candidate().candidate_id(), 3);
  EXPECT_EQ(last[2].kind(), JobEvent::BEST);
  EXPECT_EQ(last[3].kind(), JobEvent::STATE);
  EXPECT_EQ(last[3].job().state(), yirage::v1::SUCCEEDED);
  // Each candidate is reported once.
  EXPECT_TRUE(JobEvents(&done, done, &at_end, &seen).empty());
  // A better time of the same best is news too.
  Job faster = done;
  faster.mutable_best()->set_time_us(3.0);
  auto best = JobEvents(&done, faster, nullptr, &seen);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].kind(), JobEvent::BEST);
}

}  // namespace
}  // namespace yirage::server
