#include "tally/core/error.hpp"

namespace tally::detail {

void throw_invalid_argument(const char* function, const char* argument, const std::string& problem) {
  throw invalid_argument(std::string("tally::") + function + ": argument '" + argument + "' " + problem);
}

}  // namespace tally::detail
