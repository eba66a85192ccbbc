//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package agent

import "errors"

func characterMode(int) (func(), error) {
	return nil, errors.New("the scripted agent needs a Unix terminal")
}
