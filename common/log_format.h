// How the daemons write their log lines (--log-format): spdlog's usual text,
// or one JSON object a line for log collectors.
#ifndef YIRAGE_COMMON_LOG_FORMAT_H_
#define YIRAGE_COMMON_LOG_FORMAT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "spdlog/formatter.h"

namespace yirage {

// One JSON object a line: {"time":"2026-12-03T07:01:02.345Z","level":"info",
// "logger":"yirage-server","msg":"..."} (time in UTC, the message escaped as
// JSON strings are; bytes that are not UTF-8 become U+FFFD). `logger` names
// the default logger, whose spdlog name is empty.
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter(const std::string& logger);

// Sets the default logger's format: "text" (spdlog's default pattern) or
// "json" (MakeJsonLogFormatter). InvalidArgument for anything else.
absl::Status SetLogFormat(const std::string& format, const std::string& logger);

}  // namespace yirage

#endif  // YIRAGE_COMMON_LOG_FORMAT_H_
