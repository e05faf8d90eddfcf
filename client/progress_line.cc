#include "client/progress_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace yirage::client {
namespace {

std::string Phase(const yirage::v1::Job& job) {
  return absl::AsciiStrToLower(yirage::v1::JobState_Name(job.state()));
}

// Candidates done: pending counts the final round's and the confirmation's
// rows too (they keep the job running), which would make the count go back.
int Done(const yirage::v1::Job& job) {
  return std::max(job.candidates_generated() - job.candidates_pending(),
                  job.candidates_evaluated());
}

bool Ended(const yirage::v1::Job& job) {
  return job.state() == yirage::v1::SUCCEEDED || job.state() == yirage::v1::FAILED ||
         job.state() == yirage::v1::CANCELLED;
}

// While the job runs, the best speedup alone: it never drops (the server's
// best is the search's highest until the final round is whole), where the
// best candidate's time, measured beside its own baseline on a loaded
// machine, could be higher than an earlier best's. Once the job has ended,
// the winner's time too (a final round's median where it had one).
std::string Best(const yirage::v1::Job& job) {
  if (!Ended(job)) return absl::StrFormat("best %.2fx", job.best().speedup());
  const bool final_round = job.best().final_of() != 0;
  return absl::StrFormat("%s %.2fx (%.1f us%s)", final_round ? "winner" : "best",
                         job.best().speedup(), job.best().time_us(),
                         final_round ? ", final round" : "");
}

}  // namespace

std::string ShortDuration(double seconds) {
  seconds = std::max(0.0, seconds);
  if (seconds < 60) return absl::StrFormat("%.1fs", seconds);
  const int64_t s = static_cast<int64_t>(seconds);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string PlainProgressLine(const yirage::v1::Job& job) {
  std::string line = absl::StrCat(job.job_id(), " ", yirage::v1::JobState_Name(job.state()), " ",
                                  Done(job), "/", job.candidates_generated(), " candidates (",
                                  job.candidates_failed(), " failed)");
  if (job.has_best()) {
    absl::StrAppend(&line, " ", Best(job), " over baseline");
  }
  // An unfinished job says why it is not progressing ("waiting: no connected
  // worker for backend 'hip'").
  if (job.message().rfind("waiting:", 0) == 0) absl::StrAppend(&line, "; ", job.message());
  return line;
}

std::string TerminalProgressLine(const yirage::v1::Job& job, double now_unix, int columns) {
  const int width = std::max(columns - 1, 20);  // the last column would wrap
  struct Part {
    int keep;  // lower is kept longer
    std::string text;
  };
  std::vector<Part> parts;
  parts.push_back({0, absl::StrCat(job.job_id(), " ", Phase(job))});
  if (job.candidates_generated() > 0) {
    parts.push_back({1, absl::StrCat(Done(job), "/", job.candidates_generated())});
  }
  if (job.candidates_failed() > 0) {
    parts.push_back({5, absl::StrCat(job.candidates_failed(), " failed")});
  }
  if (job.has_best()) parts.push_back({2, Best(job)});
  if (job.state() == yirage::v1::RUNNING && job.started_unix() > 0 &&
      now_unix > job.started_unix() && job.candidates_evaluated() > 0) {
    parts.push_back({6, absl::StrFormat("%.1f/s", job.candidates_evaluated() /
                                                      (now_unix - job.started_unix()))});
  }
  if (job.created_unix() > 0) {
    const double end = Ended(job) && job.finished_unix() > 0 ? job.finished_unix() : now_unix;
    parts.push_back({3, ShortDuration(end - job.created_unix())});
  }
  if (job.message().rfind("waiting:", 0) == 0) parts.push_back({4, job.message()});
  // The bar: a fifth of the line, 10 to 30 cells, where 60 columns or more.
  int bar = columns >= 60 ? std::clamp(columns / 5, 10, 30) : 0;
  auto join = [&] {
    std::string line;
    if (bar > 0) {
      const int total = std::max(1, job.candidates_generated());
      const int filled = bar * std::clamp(Done(job), 0, total) / total;
      line = absl::StrCat("[", std::string(filled, '#'), std::string(bar - filled, '.'), "] ");
    }
    for (size_t i = 0; i < parts.size(); ++i) absl::StrAppend(&line, i ? "  " : "", parts[i].text);
    return line;
  };
  std::string line = join();
  while (static_cast<int>(line.size()) > width && parts.size() > 1) {
    auto drop = std::max_element(parts.begin(), parts.end(),
                                 [](const Part& a, const Part& b) { return a.keep < b.keep; });
    parts.erase(drop);
    line = join();
  }
  if (static_cast<int>(line.size()) > width && bar > 0) {
    bar = 0;
    line = join();
  }
  if (static_cast<int>(line.size()) > width) line.resize(width);
  return line;
}

int TerminalColumns(int fd) {
  struct winsize ws {};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c != nullptr && std::atoi(c) > 0) {
    return std::atoi(c);
  }
  return 80;
}

}  // namespace yirage::client
