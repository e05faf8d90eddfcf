#include "server/auth.h"

#include <fstream>

#include "gtest/gtest.h"
#include "server/test_dir.h"

namespace yirage::server {
namespace {

std::string Write(const std::filesystem::path& dir, const std::string& text) {
  const std::string path = (dir / "tokens").string();
  std::ofstream(path) << text;
  return path;
}

TEST(AuthenticatorTest, ReadsTokensRolesAndNames) {
  const std::filesystem::path dir = FreshTestDir("auth");
  auto auth = Authenticator::Open(
      Write(dir,
            "# comment\n\n  aaaaaaaaaaaaaaaa client alice\nbbbbbbbbbbbbbbbb\tworker\n"
            "cccccccccccccccc admin ops  \n"));
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE((*auth)->enabled());
  EXPECT_EQ((*auth)->TokenOf(Role::kWorker), "bbbbbbbbbbbbbbbb");
  EXPECT_EQ((*auth)->TokenOf(Role::kAdmin), "cccccccccccccccc");
  auto open = Authenticator::Open("");
  ASSERT_TRUE(open.ok());
  EXPECT_FALSE((*open)->enabled());
  EXPECT_EQ((*open)->TokenOf(Role::kWorker), std::nullopt);
}

TEST(AuthenticatorTest, BadFilesSayWhichLineAndWhyWithoutEchoingTokens) {
  const std::filesystem::path dir = FreshTestDir("auth");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"short client\n", "line 1: a token must be at least 16 characters"},
      {"aaaaaaaaaaaaaaaa reader\n", "line 1: role must be client, worker or admin, got 'reader'"},
      {"aaaaaaaaaaaaaaaa\n", "expected 'TOKEN ROLE [NAME]', got 1 fields"},
      {"aaaaaaaaaaaaaaaa client a b\n", "got 4 fields"},
      {"aaaaaaaaaaaaaaaa client x\nbbbbbbbbbbbbbbbb admin x\n", "line 2: name 'x' used twice"},
      {"aaaaaaaaaaaaaaaa client x\naaaaaaaaaaaaaaaa admin y\n", "line 2: the same token as 'x'"},
      {"aaaaaaaa\"aaaaaaaaa client x\n", "letters, digits"},
      {"# only comments\n", "no tokens"},
  };
  for (const auto& [text, expected] : cases) {
    auto auth = Authenticator::Open(Write(dir, text));
    ASSERT_FALSE(auth.ok()) << text;
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(auth.status().message().find(expected), std::string::npos) << auth.status();
    EXPECT_EQ(auth.status().message().find("aaaaaaaaaaaaaaaa"), std::string::npos);
  }
  EXPECT_EQ(Authenticator::Open((dir / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(AuthenticatorTest, ReloadKeepsTheOldTokensOnAnError) {
  const std::filesystem::path dir = FreshTestDir("auth");
  const std::string path = Write(dir, "aaaaaaaaaaaaaaaa worker w\n");
  auto auth = Authenticator::Open(path);
  ASSERT_TRUE(auth.ok());
  Write(dir, "bbbbbbbbbbbbbbbb worker w\n");
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->TokenOf(Role::kWorker), "bbbbbbbbbbbbbbbb");
  Write(dir, "broken\n");
  EXPECT_FALSE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->TokenOf(Role::kWorker), "bbbbbbbbbbbbbbbb");
}

}  // namespace
}  // namespace yirage::server
