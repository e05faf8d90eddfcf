# Writes the file INPUT as one C++ raw string literal to OUTPUT, for a source
# file to #include where it needs the text (kernel preludes: real device
# source that the backends emit ahead of every generated kernel).
#   cmake -DINPUT=... -DOUTPUT=... -P embed_text.cmake
file(READ "${INPUT}" content)
string(FIND "${content}" ")yr_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )yr_embed\"")
endif()
file(WRITE "${OUTPUT}.tmp" "R\"yr_embed(${content})yr_embed\"\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
