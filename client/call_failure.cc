#include "client/call_failure.h"

#include <ostream>

namespace yirage::client {

int ReportCallFailure(std::ostream& err, const std::string& server, const std::string& what,
                      const grpc::Status& status) {
  std::string where;
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    where = "server unavailable at " + server + ": ";
  } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    where = "deadline exceeded talking to " + server + ": ";
  }
  err << "yirage-client: " << what << ": " << where << status.error_message() << "\n";
  return 1;
}

}  // namespace yirage::client
