#include "common/log_format.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/logger.h"
#include "spdlog/sinks/ostream_sink.h"

namespace yirage {
namespace {

// One JSON object a line, its message escaped (quotes, backslashes, control
// characters, bytes that are not UTF-8), with time, level and logger.
TEST(LogFormatTest, JsonLinesParseBack) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("", sink);
  logger.set_formatter(MakeJsonLogFormatter("yirage-server"));
  logger.warn("job {} said \"hi\\there\"\nand\ttabbed \x01 \xff", "job-1");
  logger.info("second");
  std::istringstream lines(out.str());
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  ASSERT_TRUE(j.is_object()) << line;
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["logger"], "yirage-server");
  EXPECT_EQ(j["msg"], "job job-1 said \"hi\\there\"\nand\ttabbed \x01 \xef\xbf\xbd");
  const std::string time = j["time"];
  EXPECT_EQ(time.size(), 24u) << time;  // 2026-12-03T07:01:02.345Z
  EXPECT_EQ(time.back(), 'Z') << time;
  EXPECT_EQ(line.rfind("{\"time\":", 0), 0u) << line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(nlohmann::json::parse(line)["msg"], "second");
  EXPECT_FALSE(std::getline(lines, line));
}

TEST(LogFormatTest, UnknownFormatIsRefused) {
  EXPECT_TRUE(SetLogFormat("text", "x").ok());
  EXPECT_FALSE(SetLogFormat("xml", "x").ok());
}

}  // namespace
}  // namespace yirage
