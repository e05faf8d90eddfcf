#include "client/text_table.h"

#include <sstream>

#include "gtest/gtest.h"

namespace yirage::client {
namespace {

TEST(TextTableTest, ColumnsAreAsWideAsTheirWidestCell) {
  TextTable t({"JOB", "STATE", "BEST"});
  t.Add({"job-0123456789abcdef0123", "RUNNING", "-"});
  t.Add({"job-1", "SUCCEEDED", "12.3 us (2.00x)"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "JOB                       STATE      BEST\n"
            "job-0123456789abcdef0123  RUNNING    -\n"
            "job-1                     SUCCEEDED  12.3 us (2.00x)\n");
}

}  // namespace
}  // namespace yirage::client
