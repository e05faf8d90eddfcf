#include "client/expression.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace yirage::client {
namespace {

double Eval(const std::string& text, const std::map<std::string, double>& vars = {}) {
  absl::StatusOr<Expression> e = Expression::Parse(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  if (!e.ok()) return NAN;
  absl::StatusOr<double> v = e->Evaluate(vars);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status();
  return v.ok() ? *v : NAN;
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<Expression> e = Expression::Parse(text);
  EXPECT_FALSE(e.ok()) << text;
  return e.ok() ? "" : std::string(e.status().message());
}

TEST(ExpressionTest, PrecedenceAndAssociativity) {
  EXPECT_EQ(Eval("1 + 2 * 3"), 7);
  EXPECT_EQ(Eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(Eval("10 - 4 - 3"), 3) << "left-associative";
  EXPECT_EQ(Eval("2 ^ 3 ^ 2"), 512) << "right-associative";
  EXPECT_EQ(Eval("2 ** 10"), 1024);
  EXPECT_EQ(Eval("-2 ^ 2"), -4) << "the power binds tighter than the sign";
  EXPECT_EQ(Eval("2 ^ -1"), 0.5);
  EXPECT_EQ(Eval("7 / 2"), 3.5);
  EXPECT_EQ(Eval("7 // 2"), 3);
  EXPECT_EQ(Eval("-7 // 2"), -4) << "floor division";
  EXPECT_EQ(Eval("-7 % 3"), 2) << "the remainder of floor division";
  EXPECT_EQ(Eval("1.5e3 + .5"), 1500.5);
}

TEST(ExpressionTest, NamesAndFunctions) {
  const std::map<std::string, double> dims = {{"M", 16}, {"H", 4096}, {"N_2", 8}};
  EXPECT_EQ(Eval("2 * M * H * H", dims), 2.0 * 16 * 4096 * 4096);
  EXPECT_EQ(Eval("H / N_2", dims), 512);
  EXPECT_DOUBLE_EQ(Eval("1 / sqrt(H / 32)", dims), 1 / std::sqrt(128.0));
  EXPECT_EQ(Eval("max(M, 64, N_2)", dims), 64);
  EXPECT_EQ(Eval("min(M, 64)", dims), 16);
  EXPECT_EQ(Eval("ceil_div(H, 100)", dims), 41);
  EXPECT_EQ(Eval("floor(2.7) + ceil(2.1) + abs(-1) + log2(H)", dims), 2 + 3 + 1 + 12);
  absl::StatusOr<Expression> e = Expression::Parse("2 * M * max(H, K) + sqrt(M)");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Names(), (std::set<std::string>{"H", "K", "M"})) << "not the functions";
}

TEST(ExpressionTest, ErrorsSayWhereAndWhat) {
  EXPECT_NE(ParseError("2 * (M + 1").find("at column 11: expected ')'"), std::string::npos)
      << ParseError("2 * (M + 1");
  EXPECT_NE(ParseError("M +").find("at the end"), std::string::npos);
  EXPECT_NE(ParseError("M $ 2").find("at column 3: unexpected '$'"), std::string::npos)
      << ParseError("M $ 2");
  EXPECT_NE(ParseError("cube(M)").find("unknown function 'cube'"), std::string::npos);
  EXPECT_NE(ParseError("min(M)").find("min() takes 2 or more arguments, not 1"), std::string::npos);
  EXPECT_NE(ParseError("").find("expected a number"), std::string::npos);
  EXPECT_NE(ParseError(std::string(100000, '(') + "1" + std::string(100000, ')'))
                .find("nested more than 200 deep"),
            std::string::npos);
  EXPECT_NE(ParseError(std::string(100000, '-') + "1").find("nested more than 200 deep"),
            std::string::npos);
  EXPECT_EQ(Eval(std::string(50, '(') + "2" + std::string(50, ')')), 2);
  std::string chain = "1";
  for (int i = 0; i < 20000; ++i) chain += "+1";
  EXPECT_NE(ParseError(chain).find("more than 10000 operands"), std::string::npos);
  absl::StatusOr<Expression> e = Expression::Parse("M / (H - 4096) + Q");
  ASSERT_TRUE(e.ok());
  absl::StatusOr<double> v = e->Evaluate({{"M", 1}, {"H", 4096}, {"Q", 1}});
  EXPECT_FALSE(v.ok());
  EXPECT_NE(std::string(v.status().message()).find("division by zero"), std::string::npos);
  v = e->Evaluate({{"M", 1}, {"H", 1}});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(std::string(v.status().message()).find("unknown name 'Q' (the dims are: H, M)"),
            std::string::npos)
      << v.status();
  e = Expression::Parse("sqrt(M - 2)");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->Evaluate({{"M", 1}}).ok());
  e = Expression::Parse("2 ^ M");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->Evaluate({{"M", 5000}}).ok()) << "not finite";
}

}  // namespace
}  // namespace yirage::client
