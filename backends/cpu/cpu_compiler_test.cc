#include "backends/cpu/cpu_compiler.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace yirage::backends::cpu {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// A folder of its own for each test, removed at the end.
class CpuCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("yirage_compiler_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An executable shell script standing in for the compiler.
  std::string Script(const std::string& body) {
    const std::string path = (dir_ / "fake-cc").string();
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  absl::StatusOr<CompilerRun> Compile(const std::string& compiler, double timeout) {
    return CpuCompiler(compiler).CompileShared((dir_ / "k.cc").string(), (dir_ / "k.so").string(),
                                               (dir_ / "log").string(), timeout);
  }
  // The pid the fake compiler wrote to `name`, waiting up to 10 s for it.
  pid_t PidFrom(const std::string& name) {
    return yirage::testing::PidFromFile((dir_ / name).string(), seconds(10));
  }

  fs::path dir_;
};

using yirage::testing::ProcessGoneWithin;

TEST_F(CpuCompilerTest, ExitStatusAndDiagnosticsComeBack) {
  absl::StatusOr<CompilerRun> run = Compile(Script("echo 'k.cc:1: error: nope' >&2; exit 3"), 30);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->ok);
  EXPECT_FALSE(run->timed_out);
  EXPECT_EQ(run->exit_status, 3);
  EXPECT_THAT(run->diagnostics, ::testing::HasSubstr("k.cc:1: error: nope"));

  run = Compile(Script("touch \"$(dirname \"$0\")/k.so\""), 30);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->ok);
  EXPECT_EQ(run->exit_status, 0);
  EXPECT_TRUE(fs::exists(dir_ / "k.so"));
}

TEST_F(CpuCompilerTest, AMissingCompilerIsAnError) {
  absl::StatusOr<CompilerRun> run = Compile((dir_ / "no-such-cc").string(), 30);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(), ::testing::HasSubstr("no-such-cc"));
}

// The fake compiler starts a child (as the driver starts cc1plus) and waits.
constexpr char kSlowCompiler[] =
    "d=$(dirname \"$0\"); sleep 60 & echo $! > \"$d/child.pid\"; echo $$ > \"$d/driver.pid\"; "
    "wait";

TEST_F(CpuCompilerTest, ATimeoutKillsTheCompilerAndWhatItStarted) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<CompilerRun> run = Compile(Script(kSlowCompiler), 1.0);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->timed_out);
  EXPECT_FALSE(run->ok);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
  EXPECT_THAT(run->diagnostics, ::testing::HasSubstr("timeout"));
  const pid_t driver = PidFrom("driver.pid"), child = PidFrom("child.pid");
  ASSERT_GT(driver, 0);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessGoneWithin(driver, seconds(5)));
  EXPECT_TRUE(ProcessGoneWithin(child, seconds(5)));
}

// A worker SIGKILLed mid-compile (or exiting without waiting, as a drain
// that gives up does) leaves no compiler behind.
TEST_F(CpuCompilerTest, TheCompilerDiesWithItsCaller) {
  const std::string compiler = Script(kSlowCompiler);
  const pid_t caller = fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    (void)Compile(compiler, 60);
    _exit(0);
  }
  const pid_t driver = PidFrom("driver.pid"), child = PidFrom("child.pid");
  ASSERT_EQ(kill(caller, SIGKILL), 0);
  ASSERT_EQ(waitpid(caller, nullptr, 0), caller);
  ASSERT_GT(driver, 0);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessGoneWithin(driver, seconds(5)));
  EXPECT_TRUE(ProcessGoneWithin(child, seconds(5)));
}

}  // namespace
}  // namespace yirage::backends::cpu

namespace yirage::backends::cpu {
namespace {

TEST(CpuNativeMarchTest, TheNativeMarchIsReadFromGccsTargetHelp) {
  EXPECT_EQ(ParseNativeMarch("The following options are target specific:\n"
                             "  -m128bit-long-double        \t\t[enabled]\n"
                             "  -march=                     \t\tznver4\n"
                             "  -mtune=                     \t\tznver4\n"),
            "znver4");
  EXPECT_EQ(ParseNativeMarch("  -march=  \t x86-64-v3\n"), "x86-64-v3");
  EXPECT_EQ(ParseNativeMarch("clang has no such listing"), "");
  EXPECT_EQ(ParseNativeMarch("  -march=\t\tnative\n"), "") << "not resolved";
  // The compiler here, where it is GCC, names a real target.
  CpuCompiler compiler(CpuCompiler::DefaultPath());
  const std::string march = compiler.NativeMarch(::testing::TempDir() + "/march.log");
  EXPECT_NE(march, "native");
}

}  // namespace
}  // namespace yirage::backends::cpu
