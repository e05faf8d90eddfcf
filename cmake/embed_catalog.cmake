# Writes each file of INPUTS (JSON files separated by |) as one C++ initializer
# `{"STEM", R"yr_embed(TEXT)yr_embed"},` to OUTPUT, for a source file to
# #include inside an array (the chip catalog of data/chips/, one file a
# vendor).
#   cmake "-DINPUTS=a.json|b.json" -DOUTPUT=... -P embed_catalog.cmake
string(REPLACE "|" ";" inputs "${INPUTS}")
set(text "")
foreach(input IN LISTS inputs)
  file(READ "${input}" content)
  string(FIND "${content}" ")yr_embed\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${input} contains the raw-string delimiter )yr_embed\"")
  endif()
  get_filename_component(stem "${input}" NAME_WE)
  string(APPEND text "{\"${stem}\", R\"yr_embed(${content})yr_embed\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "${text}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
