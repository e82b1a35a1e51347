package lanczos

import "time"

func nowNS() float64 { return float64(time.Now().UnixNano()) }
