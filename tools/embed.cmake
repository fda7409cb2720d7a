# Turns a file into a C array, so the pprt binary carries its page
# templates and needs no data files at run time:
#   cmake -DIN=flame.html -DOUT=flame_html.c -DNAME=cli_flame_html -P embed.cmake
# defines `const unsigned char NAME[]` (NUL-terminated) and
# `const unsigned long NAME_len` (without the NUL).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR len "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
       bytes "${bytes}")
file(WRITE ${OUT}.tmp
  "/* Generated from ${IN} by tools/embed.cmake; do not edit. */\n"
  "const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
  "const unsigned long ${NAME}_len = ${len}ul;\n")
file(RENAME ${OUT}.tmp ${OUT})
