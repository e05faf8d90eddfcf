// Early-return helpers for absl::Status / absl::StatusOr.
#ifndef YIRAGE_CORE_STATUS_MACROS_H_
#define YIRAGE_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define YIRAGE_CONCAT_INNER_(a, b) a##b
#define YIRAGE_CONCAT_(a, b) YIRAGE_CONCAT_INNER_(a, b)

#define YIRAGE_RETURN_IF_ERROR(expr)            \
  do {                                          \
    if (absl::Status _st = (expr); !_st.ok()) { \
      return _st;                               \
    }                                           \
  } while (0)

#define YIRAGE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(*tmp)

#define YIRAGE_ASSIGN_OR_RETURN(lhs, expr) \
  YIRAGE_ASSIGN_OR_RETURN_IMPL_(YIRAGE_CONCAT_(_statusor_, __LINE__), lhs, expr)

#endif  // YIRAGE_CORE_STATUS_MACROS_H_
