#include "client/expression.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace yirage::client {

struct Expression::Node {
  enum class Kind { kNumber, kName, kCall, kNegate, kBinary };
  Kind kind = Kind::kNumber;
  double number = 0;
  std::string name;  // kName, kCall
  char op = 0;       // kBinary: + - * / f (floor division) % ^
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using Node = Expression::Node;
using NodePtr = std::shared_ptr<const Node>;

struct Function {
  const char* name;
  int min_args, max_args;  // max_args -1: any number from min_args
};
constexpr Function kFunctions[] = {
    {"sqrt", 1, 1}, {"abs", 1, 1},  {"floor", 1, 1}, {"ceil", 1, 1},     {"log2", 1, 1},
    {"exp", 1, 1},  {"min", 2, -1}, {"max", 2, -1},  {"ceil_div", 2, 2},
};

const Function* FindFunction(const std::string& name) {
  for (const Function& f : kFunctions) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  absl::StatusOr<NodePtr> Parse() {
    absl::StatusOr<NodePtr> e = Expr();
    if (!e.ok()) return e;
    Skip();
    if (pos_ < text_.size()) return Error(absl::StrCat("unexpected '", text_.substr(pos_, 1), "'"));
    return e;
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("expression '", text_, "': at column ", pos_ + 1, ": ", what));
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  // Consumes `token` (after whitespace) where it comes next.
  bool Take(const char* token) {
    Skip();
    const std::string t(token);
    if (text_.compare(pos_, t.size(), t) != 0) return false;
    pos_ += t.size();
    return true;
  }
  static NodePtr Binary(char op, NodePtr a, NodePtr b) {
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kBinary;
    n->op = op;
    n->args = {std::move(a), std::move(b)};
    return n;
  }

  absl::StatusOr<NodePtr> Expr() {
    absl::StatusOr<NodePtr> left = Term();
    if (!left.ok()) return left;
    NodePtr value = *std::move(left);
    for (;;) {
      char op = 0;
      if (Take("+")) {
        op = '+';
      } else if (Take("-")) {
        op = '-';
      } else {
        return value;
      }
      absl::StatusOr<NodePtr> right = Term();
      if (!right.ok()) return right;
      value = Binary(op, value, *std::move(right));
    }
  }

  absl::StatusOr<NodePtr> Term() {
    absl::StatusOr<NodePtr> left = Unary();
    if (!left.ok()) return left;
    NodePtr value = *std::move(left);
    for (;;) {
      char op = 0;
      Skip();
      if (text_.compare(pos_, 2, "**") == 0) return value;  // power, a level down
      if (Take("//")) {
        op = 'f';
      } else if (Take("*")) {
        op = '*';
      } else if (Take("/")) {
        op = '/';
      } else if (Take("%")) {
        op = '%';
      } else {
        return value;
      }
      absl::StatusOr<NodePtr> right = Unary();
      if (!right.ok()) return right;
      value = Binary(op, value, *std::move(right));
    }
  }

  absl::StatusOr<NodePtr> Unary() {
    // Each nesting (a sign, a parenthesis, a call, a power) passes here: a
    // bound keeps a hostile formula from exhausting the stack.
    if (++depth_ > kMaxDepth) return Error(absl::StrCat("nested more than ", kMaxDepth, " deep"));
    absl::StatusOr<NodePtr> r = UnaryBody();
    --depth_;
    return r;
  }

  absl::StatusOr<NodePtr> UnaryBody() {
    // Every operand passes here once: a bound on them bounds the tree (a
    // long chain of + is as deep as it is long, for evaluation too).
    if (++operands_ > kMaxOperands) {
      return Error(absl::StrCat("more than ", kMaxOperands, " operands"));
    }
    if (Take("-")) {
      absl::StatusOr<NodePtr> operand = Unary();
      if (!operand.ok()) return operand;
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kNegate;
      n->args = {*std::move(operand)};
      return NodePtr(n);
    }
    if (Take("+")) return Unary();
    return Power();
  }

  absl::StatusOr<NodePtr> Power() {
    absl::StatusOr<NodePtr> base = Primary();
    if (!base.ok()) return base;
    if (Take("**") || Take("^")) {
      absl::StatusOr<NodePtr> exponent = Unary();  // 2 ^ -1, 2 ^ 3 ^ 2 = 2 ^ 9
      if (!exponent.ok()) return exponent;
      return Binary('^', *std::move(base), *std::move(exponent));
    }
    return base;
  }

  absl::StatusOr<NodePtr> Primary() {
    Skip();
    if (pos_ >= text_.size()) return Error("expected a number, a name or '(' here, at the end");
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = text_.c_str() + pos_;
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      if (end == begin) return Error("expected a number");
      pos_ += static_cast<size_t>(end - begin);
      auto n = std::make_shared<Node>();
      n->number = v;
      return NodePtr(n);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      auto n = std::make_shared<Node>();
      n->name = text_.substr(start, pos_ - start);
      if (!Take("(")) {
        n->kind = Node::Kind::kName;
        return NodePtr(n);
      }
      const Function* f = FindFunction(n->name);
      if (f == nullptr) {
        pos_ = start;
        return Error(absl::StrCat("unknown function '", n->name,
                                  "' (sqrt, abs, floor, ceil, log2, exp, min, max, ceil_div)"));
      }
      n->kind = Node::Kind::kCall;
      do {
        absl::StatusOr<NodePtr> arg = Expr();
        if (!arg.ok()) return arg;
        n->args.push_back(*std::move(arg));
      } while (Take(","));
      if (!Take(")")) return Error("expected ',' or ')'");
      const int count = static_cast<int>(n->args.size());
      if (count < f->min_args || (f->max_args >= 0 && count > f->max_args)) {
        return Error(absl::StrCat(
            n->name, "() takes ",
            f->max_args < 0 ? absl::StrCat(f->min_args, " or more") : absl::StrCat(f->min_args),
            " arguments, not ", count));
      }
      return NodePtr(n);
    }
    if (Take("(")) {
      absl::StatusOr<NodePtr> inner = Expr();
      if (!inner.ok()) return inner;
      if (!Take(")")) return Error("expected ')'");
      return inner;
    }
    return Error(absl::StrCat("expected a number, a name or '(', not '", std::string(1, c), "'"));
  }

  static constexpr int kMaxDepth = 200;
  static constexpr int kMaxOperands = 10000;
  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
  int operands_ = 0;
};

absl::StatusOr<double> Eval(const Node& n, const std::map<std::string, double>& vars,
                            const std::string& text) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("expression '", text, "': ", what));
  };
  switch (n.kind) {
    case Node::Kind::kNumber:
      return n.number;
    case Node::Kind::kName: {
      auto it = vars.find(n.name);
      if (it == vars.end()) {
        std::string known;
        for (const auto& [name, value] : vars)
          absl::StrAppend(&known, known.empty() ? "" : ", ", name);
        return fail(absl::StrCat("unknown name '", n.name,
                                 "' (the dims are: ", known.empty() ? "none" : known, ")"));
      }
      return it->second;
    }
    case Node::Kind::kNegate: {
      absl::StatusOr<double> v = Eval(*n.args[0], vars, text);
      if (!v.ok()) return v;
      return -*v;
    }
    case Node::Kind::kCall: {
      std::vector<double> a;
      for (const NodePtr& arg : n.args) {
        absl::StatusOr<double> v = Eval(*arg, vars, text);
        if (!v.ok()) return v;
        a.push_back(*v);
      }
      if (n.name == "sqrt") {
        if (a[0] < 0) return fail(absl::StrCat("sqrt of ", a[0]));
        return std::sqrt(a[0]);
      }
      if (n.name == "abs") return std::fabs(a[0]);
      if (n.name == "floor") return std::floor(a[0]);
      if (n.name == "ceil") return std::ceil(a[0]);
      if (n.name == "log2") {
        if (a[0] <= 0) return fail(absl::StrCat("log2 of ", a[0]));
        return std::log2(a[0]);
      }
      if (n.name == "exp") return std::exp(a[0]);
      if (n.name == "min" || n.name == "max") {
        double r = a[0];
        for (double v : a) r = n.name == "min" ? std::min(r, v) : std::max(r, v);
        return r;
      }
      // ceil_div
      if (a[1] == 0) return fail("ceil_div by zero");
      return std::ceil(a[0] / a[1]);
    }
    case Node::Kind::kBinary: {
      absl::StatusOr<double> x = Eval(*n.args[0], vars, text);
      if (!x.ok()) return x;
      absl::StatusOr<double> y = Eval(*n.args[1], vars, text);
      if (!y.ok()) return y;
      switch (n.op) {
        case '+':
          return *x + *y;
        case '-':
          return *x - *y;
        case '*':
          return *x * *y;
        case '^':
          return std::pow(*x, *y);
        default:
          break;
      }
      if (*y == 0) return fail("division by zero");
      if (n.op == '/') return *x / *y;
      if (n.op == 'f') return std::floor(*x / *y);
      return *x - *y * std::floor(*x / *y);  // '%'
    }
  }
  return fail("bad expression tree");
}

void CollectNames(const Node& n, std::set<std::string>* out) {
  if (n.kind == Node::Kind::kName) out->insert(n.name);
  for (const NodePtr& a : n.args) CollectNames(*a, out);
}

}  // namespace

absl::StatusOr<Expression> Expression::Parse(const std::string& text) {
  Parser parser(text);
  absl::StatusOr<NodePtr> root = parser.Parse();
  if (!root.ok()) return root.status();
  return Expression(text, *std::move(root));
}

absl::StatusOr<double> Expression::Evaluate(const std::map<std::string, double>& vars) const {
  absl::StatusOr<double> v = Eval(*root_, vars, text_);
  if (v.ok() && !std::isfinite(*v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expression '", text_, "': the value is not finite (", *v, ")"));
  }
  return v;
}

std::set<std::string> Expression::Names() const {
  std::set<std::string> names;
  CollectNames(*root_, &names);
  return names;
}

}  // namespace yirage::client
