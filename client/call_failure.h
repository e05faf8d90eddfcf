// How the CLI's commands report a failed call: one line on stderr naming the
// command, the server where it could not be reached or did not answer in
// time, and the status's message.
#ifndef YIRAGE_CLIENT_CALL_FAILURE_H_
#define YIRAGE_CLIENT_CALL_FAILURE_H_

#include <iosfwd>
#include <string>

#include "grpcpp/support/status.h"

namespace yirage::client {

// Writes "yirage-client: WHAT: [server unavailable at SERVER: | deadline
// exceeded talking to SERVER: ]MESSAGE" to `err`. Returns 1 (the exit code).
int ReportCallFailure(std::ostream& err, const std::string& server, const std::string& what,
                      const grpc::Status& status);

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_CALL_FAILURE_H_
