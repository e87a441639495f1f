// Small status-propagation macros. The packaged abseil (20220623) predates
// ABSL_RETURN_IF_ERROR / ABSL_ASSIGN_OR_RETURN, so the project carries its own.
#ifndef SPECVERIFY_KERNELS_COMMON_STATUS_MACROS_H_
#define SPECVERIFY_KERNELS_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SV_STATUS_CONCAT_INNER_(a, b) a##b
#define SV_STATUS_CONCAT_(a, b) SV_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define SV_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    ::absl::Status sv_status_ = (expr);                   \
    if (!sv_status_.ok()) return sv_status_;              \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error.
#define SV_ASSIGN_OR_RETURN(lhs, expr) \
  SV_ASSIGN_OR_RETURN_IMPL_(SV_STATUS_CONCAT_(sv_statusor_, __LINE__), lhs, expr)

#define SV_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // SPECVERIFY_KERNELS_COMMON_STATUS_MACROS_H_
