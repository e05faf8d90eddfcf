// Arithmetic expressions over named dimensions, for spec files
// (client/spec_file.h): shapes such as "H / 2", attributes such as
// "1 / sqrt(D)", and FLOP and byte formulas such as "2 * M * N * K".
// A recursive-descent parser builds a tree once; evaluation binds names.
//
// Grammar (whitespace between tokens is free):
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/' | '//' | '%') unary)*
//   unary   := ('-' | '+') unary | power
//   power   := primary (('^' | '**') unary)?          (right-associative)
//   primary := NUMBER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'
// NUMBER: decimal, with an optional fraction and exponent ("1e-3"). '/' is
// real division, '//' floor division, '%' the remainder of floor division.
// Functions: sqrt, abs, floor, ceil, log2, exp, min(a, b, ...),
// max(a, b, ...), ceil_div(a, b).
#ifndef YIRAGE_CLIENT_EXPRESSION_H_
#define YIRAGE_CLIENT_EXPRESSION_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace yirage::client {

class Expression {
 public:
  // Parses `text`, or says at which column (1-based) what was expected.
  static absl::StatusOr<Expression> Parse(const std::string& text);

  // The value with each name bound by `vars`; an unbound name, a division
  // by zero, or a result that is not finite is an error naming it.
  absl::StatusOr<double> Evaluate(const std::map<std::string, double>& vars) const;

  // The names it reads (not the functions it calls).
  std::set<std::string> Names() const;

  const std::string& text() const { return text_; }

  struct Node;

 private:
  Expression(std::string text, std::shared_ptr<const Node> root)
      : text_(std::move(text)), root_(std::move(root)) {}

  std::string text_;
  std::shared_ptr<const Node> root_;  // immutable, so copies share it
};

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_EXPRESSION_H_
