package doctor

import (
	"os"
	"syscall"
)

func canTraverse(fi os.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := fi.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		return mode&0o100 != 0
	case int(st.Gid) == gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}
