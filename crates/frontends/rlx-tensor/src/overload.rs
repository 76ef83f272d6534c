//! Operator overloading: `+ - * /` and unary `-` on `Tensor` / `&Tensor` and on `f64` scalars
//! (one scalar type, so a literal like `2.0` needs no suffix), with NumPy broadcasting. A scalar
//! takes the tensor's dtype (JAX's weak typing).

use crate::Tensor;
use std::ops::{Add, Div, Mul, Neg, Sub};

macro_rules! binop {
    ($Trait:ident, $method:ident, $builder:ident) => {
        impl $Trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::apply(&[self, rhs], |g, x| g.$builder(x[0], x[1]))
            }
        }
        impl $Trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                $Trait::$method(self, &rhs)
            }
        }
        impl $Trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                $Trait::$method(&self, rhs)
            }
        }
        impl $Trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                $Trait::$method(&self, &rhs)
            }
        }
        binop!(@scalar $Trait, $method, $builder, f64);
    };
    (@scalar $Trait:ident, $method:ident, $builder:ident, $s:ty) => {
        impl $Trait<$s> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                Tensor::apply(&[self], |g, x| {
                    let s = g.scalar_like(rhs, x[0]);
                    g.$builder(x[0], s)
                })
            }
        }
        impl $Trait<$s> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                $Trait::$method(&self, rhs)
            }
        }
        impl $Trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::apply(&[rhs], |g, x| {
                    let s = g.scalar_like(self, x[0]);
                    g.$builder(s, x[0])
                })
            }
        }
        impl $Trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                $Trait::$method(self, &rhs)
            }
        }
    };
}

binop!(Add, add, add);
binop!(Sub, sub, sub);
binop!(Mul, mul, mul);
binop!(Div, div, div);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::apply(&[self], |g, x| g.neg(x[0]))
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        -&self
    }
}
