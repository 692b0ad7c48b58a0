# Debian 12's xsimd 8 package exports a target `xsimd` whose INTERFACE_LINK_LIBRARIES names a plain
# `xtl`, without finding xtl; anything that links it then fails with "-lxtl: not found". xsimd needs
# xtl only for XSIMD_ENABLE_XTL_COMPLEX, which specdec does not use, so drop the dangling name.
# Used by specdec's own build and by the installed specdecConfig.cmake.
function(specdec_fix_xsimd_target)
  if(NOT TARGET xsimd OR TARGET xtl)
    return()
  endif()
  get_target_property(_libs xsimd INTERFACE_LINK_LIBRARIES)
  if(NOT _libs)
    return()
  endif()
  list(FIND _libs xtl _at)   # (not IN_LIST: this runs under the consumer's policy settings)
  if(_at GREATER -1)
    list(REMOVE_ITEM _libs xtl)
    set_property(TARGET xsimd PROPERTY INTERFACE_LINK_LIBRARIES "${_libs}")
  endif()
endfunction()
