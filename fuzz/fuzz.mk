# fuzz/fuzz.mk - libFuzzer targets (make fuzz), included by the Makefile.
#
#   make fuzz              every target into build/fuzz/, seed corpora into
#                          build/fuzz/corpus/NAME/ (made by bin/ tools)
#   sh fuzz/run.sh NAME SECONDS      fuzz one target (one job, one worker)
#
# Each target and a private copy of the library are compiled with clang's
# libFuzzer, ASan and UBSan; the normal build's objects are never used.
# Works included from the top-level Makefile (it then reuses LIB_SRC,
# CMD_SRC and BINS) or alone: make -f fuzz/fuzz.mk fuzz.

ifndef FUZZ_CC
FUZZ_CC    := $(shell command -v clang-14 2>/dev/null || command -v clang 2>/dev/null)
endif
ifeq ($(strip $(FUZZ_CC)),)
FUZZ_CC     = $(error make fuzz needs clang with libFuzzer (Debian: clang))
endif
FUZZ_DIR   := build/fuzz
FUZZ_SAN   := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_FLAGS := -g -O1 $(FUZZ_SAN) -fno-omit-frame-pointer -fopenmp \
	      -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-pass-failed \
	      -Ilib -Ifuzz -MMD -MP
FUZZ_LIBS  := -lz -lm
ifneq ($(wildcard /usr/include/jansson.h /usr/include/*/jansson.h),)
FUZZ_FLAGS += -DANDREA_JSON
FUZZ_LIBS  += -ljansson
endif
ifneq ($(wildcard /usr/include/pcre2.h /usr/include/*/pcre2.h),)
FUZZ_FLAGS += -DANDREA_PCRE2
FUZZ_LIBS  += -lpcre2-8
endif

FUZZ_LIB_SRC := $(or $(LIB_SRC),$(wildcard lib/*/*.c))
FUZZ_CMD_SRC := $(or $(CMD_SRC),$(wildcard cmd/*.c))
FUZZ_NAMES   := stream npy model attrs argv safetensors gpt2config llmc \
		vocab tokjson tokrecords rendezvous checkpoint capture
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_CMD_OBJ := $(FUZZ_CMD_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_TOOL_IDS := $(subst -,_,$(FUZZ_CMD_SRC:cmd/%.c=%))
FUZZ_TOOL_LIST := $(foreach t,$(FUZZ_TOOL_IDS),X($t))

# The argv target: every tool's main renamed, exit() turned into a jump
# back to the harness, and the calls that start real work (model, input,
# output, files) turned into stops (fuzz/fuzz_argv.c).  Only cmd/*.c is
# compiled so: where a tool hands its work to lib/ (andrea-train's
# train_run and cli_ranks_launch, the model and token readers of
# lib/cli), that call must be a stop too.
FUZZ_STOPS := -Dexit=fuzz_exit -Dmalloc=fuzz_malloc -Dcalloc=fuzz_calloc \
	-Drealloc=fuzz_realloc -Dfree=fuzz_free \
	-Dstage_open_model=fuzz_stop_model -Dat_model_open=fuzz_stop_model_open \
	-Dtrain_model_init=fuzz_stop_train_model_init -Dat_filter_main=fuzz_stop_filter \
	-Dcli_open_input=fuzz_stop_input -Dcli_open_output=fuzz_stop_output \
	-Dat_reader_open=fuzz_stop_reader_open -Dat_writer_open=fuzz_stop_writer_open \
	-Dat_npy_read=fuzz_stop_npy_read -Dat_st_open=fuzz_stop_st_open \
	-Dfopen=fuzz_stop_fopen -Dmkdir=fuzz_stop_mkdir \
	-Dtrain_run=fuzz_stop_train_run -Dcli_ranks_launch=fuzz_stop_ranks_launch \
	-Dstage_open_model_heads=fuzz_stop_model -Dstage_whole_model=fuzz_stop_whole_model \
	-Dcli_read_text=fuzz_stop_read_text -Dcli_tokens_from_text=fuzz_stop_tokens_text \
	-Dcli_tokens_from_stream=fuzz_stop_tokens_stream \
	-Dcli_tokens_from_lines=fuzz_stop_tokens_lines

fuzz: fuzz-bins fuzz-corpus

fuzz-bins: $(FUZZ_BINS)

fuzz-corpus: $(FUZZ_BINS) $(or $(BINS),$(FUZZ_CMD_SRC:cmd/%.c=bin/%))
	sh fuzz/make-corpus.sh $(FUZZ_DIR)/corpus

$(FUZZ_DIR)/libandrea.a: $(FUZZ_LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/obj/lib/%.o: lib/%.c fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -c -o $@ $<

# objects depend on this file too: a change of flags rebuilds them
$(FUZZ_DIR)/obj/fuzz/%.o: fuzz/%.c fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -c -o $@ $<

$(FUZZ_DIR)/obj/cmd/%.o: cmd/%.c fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Dmain=tool_$(subst -,_,$*)_main $(FUZZ_STOPS) -c -o $@ $<

$(FUZZ_DIR)/obj/argv-cli.o: lib/cli/cli.c fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Dexit=fuzz_exit -c -o $@ $<

$(FUZZ_DIR)/obj/fuzz/fuzz_argv.o: fuzz/fuzz_argv.c $(FUZZ_CMD_SRC) fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) '-DFUZZ_TOOLS=$(FUZZ_TOOL_LIST)' -c -o $@ $<

$(FUZZ_DIR)/fuzz_argv: $(FUZZ_DIR)/obj/fuzz/fuzz_argv.o $(FUZZ_CMD_OBJ) \
		       $(FUZZ_DIR)/obj/argv-cli.o $(FUZZ_DIR)/libandrea.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^ $(FUZZ_LIBS)

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/fuzz/fuzz_%.o $(FUZZ_DIR)/obj/fuzz/fuzz_common.o \
		    $(FUZZ_DIR)/libandrea.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^ $(FUZZ_LIBS)

.PHONY: fuzz fuzz-bins fuzz-corpus
-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
