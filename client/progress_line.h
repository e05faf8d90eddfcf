// The progress line that `watch` and `submit --wait` show for a job.
#ifndef YIRAGE_CLIENT_PROGRESS_LINE_H_
#define YIRAGE_CLIENT_PROGRESS_LINE_H_

#include <string>

#include "yirage/v1/job.pb.h"

namespace yirage::client {

// For a terminal `columns` wide: a bar (where there is room), the job, its
// phase, candidates done of all, failures, the rate, the best so far and the
// time since it was submitted (at `now_unix`; to its end once it ended),
// fitted by dropping the least useful parts first, then cut.
std::string TerminalProgressLine(const yirage::v1::Job& job, double now_unix, int columns);

// For a log (no terminal): the same facts without the bar and the clock, so
// that the line changes only when the job does.
std::string PlainProgressLine(const yirage::v1::Job& job);

// "12.3s", "4m05s", "1h02m".
std::string ShortDuration(double seconds);

// The width of the terminal on file descriptor `fd`; else $COLUMNS; else 80.
int TerminalColumns(int fd);

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_PROGRESS_LINE_H_
