#include "common/log_format.h"

#include <chrono>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "spdlog/details/log_msg.h"
#include "spdlog/spdlog.h"

namespace yirage {
namespace {

class JsonLogFormatter : public spdlog::formatter {
 public:
  explicit JsonLogFormatter(std::string logger) : logger_(std::move(logger)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["time"] = IsoTime(msg.time);
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    line["logger"] = msg.logger_name.size() > 0
                         ? std::string(msg.logger_name.data(), msg.logger_name.size())
                         : logger_;
    line["msg"] = std::string(msg.payload.data(), msg.payload.size());
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text.push_back('\n');
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>(logger_);
  }

 private:
  // RFC 3339 in UTC with milliseconds.
  static std::string IsoTime(spdlog::log_clock::time_point t) {
    const auto since_epoch = t.time_since_epoch();
    const std::time_t seconds =
        std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                           utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                           static_cast<int>(millis));
  }

  const std::string logger_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter(const std::string& logger) {
  return std::make_unique<JsonLogFormatter>(logger);
}

absl::Status SetLogFormat(const std::string& format, const std::string& logger) {
  if (format == "text") return absl::OkStatus();
  if (format == "json") {
    spdlog::set_formatter(MakeJsonLogFormatter(logger));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format: expected text or json, got '", format, "'"));
}

}  // namespace yirage
